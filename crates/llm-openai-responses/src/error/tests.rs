use super::*;
use serde_json::json;

#[test]
fn http_bodies_map_to_kinds() {
    let body = r#"{
  "error": {
    "message": "Invalid schema for function 'get_weather': In context=(), object schema missing properties.",
    "type": "invalid_request_error",
    "param": "tools[0].parameters",
    "code": "invalid_function_parameters"
  }
}"#;
    let e = http_error(400, None, body.to_owned());
    assert_eq!(e.kind, ErrorKind::InvalidRequest);
    assert!(!e.retryable);
    assert_eq!(e.code.as_deref(), Some("invalid_function_parameters"));
    assert!(e.message.starts_with("Invalid schema"));
    assert_eq!(e.body.as_deref(), Some(body));

    let e = http_error(401, None, r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#.into());
    assert_eq!((e.kind, e.retryable), (ErrorKind::Auth, false));

    let e = http_error(429, Some(Duration::from_secs(2)), r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#.into());
    assert_eq!(
        (e.kind, e.retryable, e.retry_after),
        (ErrorKind::RateLimited, true, Some(Duration::from_secs(2)))
    );

    let e = http_error(429, None, r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#.into());
    assert_eq!((e.kind, e.retryable), (ErrorKind::RateLimited, false));

    let e = http_error(400, None, r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","code":"context_length_exceeded"}}"#.into());
    assert_eq!(e.kind, ErrorKind::ContextLength);

    let e = http_error(503, None, "upstream connect error".into());
    assert_eq!((e.kind, e.retryable), (ErrorKind::Overloaded, true));
    assert_eq!(e.message, "HTTP 503: upstream connect error");

    let e =
        http_error(500, None, r#"{"error":{"message":["a", {"message": "b"}],"code":500}}"#.into());
    assert_eq!((e.message.as_str(), e.code.as_deref()), ("a; b", Some("500")));
}

#[test]
fn stream_errors_nested_flat_and_null_code() {
    let nested = json!({"type":"insufficient_quota","code":"insufficient_quota","message":"You exceeded your current quota","param":null});
    let e = stream_error(&nested, "raw");
    assert_eq!((e.kind, e.retryable), (ErrorKind::RateLimited, false));
    assert_eq!(e.message, "insufficient_quota: You exceeded your current quota");
    assert_eq!(e.body.as_deref(), Some("raw"));

    let null_code = json!({"type":"server_error","code":null,"message":"Sorry, something went wrong.","param":null});
    let e = stream_error(&null_code, "raw");
    assert_eq!((e.kind, e.retryable), (ErrorKind::Overloaded, true));
    assert_eq!(e.code.as_deref(), Some("server_error"));

    let flat = json!({"type":"error","code":"x","message":"y"});
    let e = stream_error(&flat, "");
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Provider, "x: y"));

    let e = stream_error(&json!({}), "");
    assert_eq!(e.message, "Unknown error (no error details in response)");
}
