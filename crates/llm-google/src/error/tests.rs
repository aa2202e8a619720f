use super::*;

#[test]
fn invalid_key_is_auth_not_retried() {
    let body = r#"{
  "error": {
    "code": 400,
    "message": "API key not valid. Please pass a valid API key.",
    "status": "INVALID_ARGUMENT",
    "details": [
      {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "API_KEY_INVALID",
        "domain": "googleapis.com"
      }
    ]
  }
}
"#;
    let e = http_error(400, None, body.to_owned());
    assert_eq!(e.kind, ErrorKind::Auth);
    assert!(!e.retryable);
    assert_eq!(e.status, Some(400));
    assert_eq!(e.code.as_deref(), Some("INVALID_ARGUMENT"));
    assert_eq!(e.body.as_deref(), Some(body));
}

#[test]
fn rate_limit_uses_retry_info_when_no_header() {
    let body = r#"[{"error": {"code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED",
          "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "34s"}]}}]"#;
    let e = http_error(429, None, body.to_owned());
    assert_eq!(e.kind, ErrorKind::RateLimited);
    assert!(e.retryable);
    assert_eq!(e.retry_after, Some(Duration::from_secs(34)));
    let e = http_error(429, Some(Duration::from_secs(2)), body.to_owned());
    assert_eq!(e.retry_after, Some(Duration::from_secs(2)));
}

#[test]
fn lenient_shapes() {
    let e = http_error(503, None, "<html>oops</html>".to_owned());
    assert_eq!(e.kind, ErrorKind::Overloaded);
    assert_eq!(e.message, "HTTP 503: <html>oops</html>");
    assert!(e.retryable);
    let e = http_error(400, None, r#"{"error":{"code":"400","message":{"a":1}}}"#.to_owned());
    assert_eq!(e.kind, ErrorKind::InvalidRequest);
    assert_eq!(e.message, r#"{"a":1}"#);
    let e = http_error(
            400,
            None,
            r#"{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#.to_owned(),
        );
    assert_eq!(e.kind, ErrorKind::ContextLength);
}

#[test]
fn stream_errors() {
    let raw = r#"{"error": {"code": 503,"message": "This model is currently experiencing high demand.","status": "UNAVAILABLE"}}"#;
    let v: Value = serde_json::from_str(raw).unwrap();
    let e = stream_error(chunk_error(&v).unwrap(), raw);
    assert_eq!(e.kind, ErrorKind::Overloaded);
    assert!(e.retryable);
    assert_eq!(e.status, None);
    assert_eq!(e.code.as_deref(), Some("UNAVAILABLE"));
    let v =
        serde_json::json!({"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}});
    let e = stream_error(chunk_error(&v).unwrap(), "{}");
    assert_eq!(e.kind, ErrorKind::InvalidRequest);
    assert!(!e.retryable);
}
