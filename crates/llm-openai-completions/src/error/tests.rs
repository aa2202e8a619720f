use super::*;
use serde_json::json;

#[test]
fn openai_400_invalid_schema() {
    let body = r#"{
  "error": {
    "message": "Invalid schema for function 'get_weather': In context=(), object schema missing properties.",
    "type": "invalid_request_error",
    "param": "tools[0].function.parameters",
    "code": "invalid_function_parameters"
  }
}"#;
    let e = http_error("openai", 400, None, body.to_owned());
    assert_eq!(e.kind, ErrorKind::InvalidRequest);
    assert!(!e.retryable);
    assert_eq!(e.status, Some(400));
    assert_eq!(e.code.as_deref(), Some("invalid_function_parameters"));
    assert!(e.message.starts_with("Invalid schema for function 'get_weather'"));
    assert_eq!(e.body.as_deref(), Some(body));
}

#[test]
fn auth_quota_rate_limit_context_length() {
    let e = http_error(
            "openai",
            401,
            None,
            json!({"error": {"message": "Incorrect API key provided: sk-te**********", "type": "invalid_request_error", "code": "invalid_api_key"}}).to_string(),
        );
    assert_eq!((e.kind, e.retryable), (ErrorKind::Auth, false));

    let e = http_error(
            "openai",
            429,
            Some(Duration::from_secs(2)),
            json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}).to_string(),
        );
    assert_eq!(
        (e.kind, e.retryable, e.retry_after),
        (ErrorKind::RateLimited, true, Some(Duration::from_secs(2)))
    );

    let e = http_error(
            "openai",
            429,
            None,
            json!({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}}).to_string(),
        );
    assert_eq!((e.kind, e.retryable), (ErrorKind::RateLimited, false));

    let e = http_error(
            "openai",
            400,
            None,
            json!({"error": {"message": "This model's maximum context length is 128000 tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"}}).to_string(),
        );
    assert_eq!(e.kind, ErrorKind::ContextLength);
}

#[test]
fn lenient_shapes() {
    // Gemini compatibility endpoint: a list of envelopes.
    let e = http_error(
        "google",
        400,
        None,
        r#"[{"error":{"code":400,"message":"Bad thing","status":"INVALID_ARGUMENT"}}]"#.into(),
    );
    assert_eq!(e.message, "Bad thing");
    assert_eq!(e.code.as_deref(), Some("400"));
    // vLLM: top-level fields.
    let e = http_error(
        "vllm",
        400,
        None,
        r#"{"object":"error","message":"bad","type":"BadRequestError","code":400}"#.into(),
    );
    assert_eq!(e.message, "bad");
    // Plain text from a gateway.
    let e = http_error("x", 502, None, "<html>502 Bad Gateway</html>".into());
    assert_eq!(e.message, "HTTP 502: <html>502 Bad Gateway</html>");
    assert_eq!((e.kind, e.retryable), (ErrorKind::Overloaded, true));
    // Empty body, string error, object message.
    assert_eq!(http_error("x", 503, None, String::new()).message, "HTTP 503");
    assert_eq!(http_error("x", 500, None, r#"{"error":"boom"}"#.into()).message, "boom");
    assert_eq!(
        http_error("x", 500, None, r#"{"error":{"message":{"a":1}}}"#.into()).message,
        r#"{"a":1}"#
    );
}

#[test]
fn stream_errors() {
    let raw = r#"{"error":{"message":"The server had an error processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}"#;
    let e = stream_error("openai", &serde_json::from_str(raw).unwrap(), raw);
    assert_eq!((e.kind, e.retryable), (ErrorKind::Overloaded, true));
    assert_eq!(e.status, None);
    assert_eq!(e.body.as_deref(), Some(raw));

    let raw = r#"{"error":{"code":502,"message":"Upstream failed","metadata":{"raw":"{\"detail\":\"x\"}","provider_name":"P"}}}"#;
    let e = stream_error("openrouter", &serde_json::from_str(raw).unwrap(), raw);
    assert_eq!((e.kind, e.retryable), (ErrorKind::Overloaded, true));
    assert_eq!(e.message, "Upstream failed\n{\"detail\":\"x\"}");

    let raw = r#"{"error":{"message":"nope","type":"invalid_request_error"}}"#;
    let e = stream_error("openai", &serde_json::from_str(raw).unwrap(), raw);
    assert_eq!((e.kind, e.retryable), (ErrorKind::InvalidRequest, false));
}
