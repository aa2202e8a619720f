use super::*;

#[test]
fn message_string_code_string() {
    let body = r#"{"object":"error","message":"Tool call id was toolu_01 but must be a-z, A-Z, 0-9, with a length of 9.","type":"invalid_function_call","param":null,"code":"3280","raw_status_code":400}"#;
    let e = http_error(400, None, body.into());
    assert_eq!(e.kind, ErrorKind::InvalidRequest);
    assert!(e.message.starts_with("Tool call id was toolu_01"));
    assert_eq!(e.code.as_deref(), Some("invalid_function_call"));
    assert_eq!(e.status, Some(400));
    assert!(!e.retryable);
    assert_eq!(e.body.as_deref(), Some(body));
}

#[test]
fn message_object_code_null() {
    let body = r#"{"object":"error","message":{"detail":[{"type":"extra_forbidden","loc":["body","max_completion_tokens"],"msg":"Extra inputs are not permitted","input":32000}]},"type":"invalid_request_error","param":null,"code":null}"#;
    let e = http_error(422, None, body.into());
    assert_eq!(e.kind, ErrorKind::InvalidRequest);
    assert_eq!(e.message, "body.max_completion_tokens: Extra inputs are not permitted");
    assert_eq!(e.code.as_deref(), Some("invalid_request_error"));
}

#[test]
fn message_array_code_number() {
    let body = r#"{"object":"Error","detail":[{"loc":["body","x"],"msg":"bad"}],"message":[{"loc":["body","x"],"msg":"bad"},{"loc":["body",0],"msg":"worse"}],"code":3001}"#;
    let e = http_error(422, None, body.into());
    assert_eq!(e.message, "body.x: bad; body.0: worse");
    assert_eq!(e.code.as_deref(), Some("3001"));
}

#[test]
fn detail_only_and_bare_message() {
    let e = http_error(401, None, r#"{"detail":"Unauthorized"}"#.into());
    assert_eq!((e.kind, e.message.as_str(), e.code), (ErrorKind::Auth, "Unauthorized", None));
    let e = http_error(401, None, r#"{"message":"Unauthorized","request_id":"abc"}"#.into());
    assert_eq!(e.message, "Unauthorized");
    let e = http_error(
        422,
        None,
        r#"{"detail":[{"loc":["body","stream_options"],"msg":"Extra inputs are not permitted"}]}"#
            .into(),
    );
    assert_eq!(e.message, "body.stream_options: Extra inputs are not permitted");
}

#[test]
fn rate_limit_is_retryable_with_delay() {
    let body = r#"{"object":"error","message":"Rate limit exceeded","type":"rate_limited","param":null,"code":"1300","raw_status_code":429}"#;
    let e = http_error(429, Some(Duration::from_secs(2)), body.into());
    assert_eq!(e.kind, ErrorKind::RateLimited);
    assert!(e.retryable);
    assert_eq!(e.retry_after, Some(Duration::from_secs(2)));
    assert_eq!(e.code.as_deref(), Some("rate_limited"));
}

#[test]
fn non_json_and_empty_bodies() {
    let e = http_error(503, None, "upstream connect error".into());
    assert_eq!(
        (e.kind, e.message.as_str(), e.retryable),
        (ErrorKind::Overloaded, "HTTP 503: upstream connect error", true)
    );
    let e = http_error(500, None, String::new());
    assert_eq!(e.message, "HTTP 500");
    let long = "x".repeat(5000);
    let e = http_error(502, None, long);
    assert_eq!(e.message, format!("HTTP 502: {}", "x".repeat(llm_http::MAX_EXCERPT_CHARS)));
    let long = serde_json::json!({"message": "y".repeat(5000)}).to_string();
    let e = http_error(400, None, long);
    assert!(e.message.ends_with("... [truncated 1000 chars]"));
}

#[test]
fn context_length_message() {
    let body = r#"{"object":"error","message":"Prompt contains 140000 tokens and 0 draft tokens, too large for model with 131072 maximum context length","type":"invalid_request_error","param":null,"code":null}"#;
    assert_eq!(http_error(400, None, body.into()).kind, ErrorKind::ContextLength);
}

#[test]
fn odd_shapes_never_fail() {
    for body in [
        "[]",
        "null",
        "3",
        r#"{"message":null,"code":null}"#,
        r#"{"message":{"a":1}}"#,
        r#"{"message":[1,2]}"#,
        r#"{"error":{"message":"x","code":7}}"#,
    ] {
        let e = http_error(400, None, body.into());
        assert!(!e.message.is_empty(), "{body}");
    }
    let read = ErrorBody::parse(r#"{"message":{"a":1}}"#);
    assert_eq!(read.message.as_deref(), Some(r#"{"a":1}"#));
    let read = ErrorBody::parse(r#"{"error":{"message":"x","code":7}}"#);
    assert_eq!((read.message.as_deref(), label(&read)), (Some("x"), Some("7")));
}

#[test]
fn in_stream_error_object() {
    let raw = r#"{"object":"error","message":"Service tier capacity exceeded for this model.","type":"service_tier_capacity_exceeded","code":"3505"}"#;
    let e = stream_error(&serde_json::from_str(raw).unwrap(), raw);
    assert_eq!(e.kind, ErrorKind::Overloaded);
    assert!(e.retryable);
}
