use super::*;

#[test]
fn decodes_the_standard_envelope() {
    let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"tools.0.custom.input_schema.type: Field required"},"request_id":"req_011CExample"}"#;
    let e = http_error(400, None, body.to_owned());
    assert_eq!(e.kind, ErrorKind::InvalidRequest);
    assert_eq!(e.status, Some(400));
    assert_eq!(e.code.as_deref(), Some("invalid_request_error"));
    assert_eq!(e.message, "tools.0.custom.input_schema.type: Field required");
    assert_eq!(e.body.as_deref(), Some(body));
    assert!(!e.retryable);
}

#[test]
fn statuses_and_types_map_to_kinds() {
    let cases = [
        (
            401,
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
            ErrorKind::Auth,
            false,
        ),
        (
            403,
            r#"{"type":"error","error":{"type":"permission_error","message":"no"}}"#,
            ErrorKind::Auth,
            false,
        ),
        (
            429,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
            ErrorKind::RateLimited,
            true,
        ),
        (
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            ErrorKind::Overloaded,
            true,
        ),
        (500, r#"{"type":"api_error","message":"Overloaded"}"#, ErrorKind::Overloaded, true),
        (
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
            ErrorKind::ContextLength,
            false,
        ),
        (
            404,
            r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-x"}}"#,
            ErrorKind::InvalidRequest,
            false,
        ),
        (502, "<html>Bad Gateway</html>", ErrorKind::Overloaded, true),
        (409, "", ErrorKind::InvalidRequest, true),
    ];
    for (status, body, kind, retryable) in cases {
        let e = http_error(status, None, body.to_owned());
        assert_eq!(e.kind, kind, "{status} {body}");
        assert_eq!(e.retryable, retryable, "{status} {body}");
        assert!(!e.message.is_empty());
    }
}

#[test]
fn lenient_message_shapes() {
    let e = http_error(400, None, r#"{"error":{"message":{"message":"nested"}}}"#.into());
    assert_eq!(e.message, "nested");
    let e =
        http_error(400, None, r#"{"error":{"message":[{"message":"a"},"b"],"code":42}}"#.into());
    assert_eq!(e.message, "a; b");
    let e = http_error(400, None, r#"{"error":"plain"}"#.into());
    assert_eq!(e.message, "plain");
    let e = http_error(503, None, String::new());
    assert_eq!(e.message, "HTTP 503");
    assert!(e.body.is_none());
    let long = "é".repeat(400);
    let e = http_error(500, None, long);
    assert_eq!(e.message, format!("HTTP 500: {}", "é".repeat(llm_http::MAX_EXCERPT_CHARS)));
}

#[test]
fn stream_error_is_retryable_only_when_overloaded() {
    let e = stream_error(
        r#"{"type":"error","error":{"details":null,"type":"overloaded_error","message":"Overloaded"}}"#,
    );
    assert_eq!(e.kind, ErrorKind::Overloaded);
    assert!(e.retryable);
    assert_eq!(e.status, None);
    assert_eq!(e.code.as_deref(), Some("overloaded_error"));
    let e = stream_error(
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}"#,
    );
    assert!(!e.retryable);
    let e = stream_error("not json");
    assert_eq!(e.kind, ErrorKind::Provider);
    assert_eq!(e.message, "not json");
}
