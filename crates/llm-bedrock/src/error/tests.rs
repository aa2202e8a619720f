use super::*;

#[test]
fn http_errors_name_the_exception() {
    let e = http_error(403, None, r#"{"message":"no access"}"#.into());
    assert_eq!(e.message, "AccessDeniedException: no access");
    assert_eq!((e.kind, e.status, e.retryable), (ErrorKind::Auth, Some(403), false));
    assert_eq!(e.body.as_deref(), Some(r#"{"message":"no access"}"#));

    let e = http_error(
        429,
        Some(Duration::from_secs(2)),
        r#"{"__type":"com.amazon.bedrock#ThrottlingException","message":"Too many tokens, please wait"}"#.into(),
    );
    assert_eq!(e.message, "Throttling error: Too many tokens, please wait");
    assert_eq!((e.kind, e.retryable), (ErrorKind::RateLimited, true));
    assert_eq!(e.retry_after, Some(Duration::from_secs(2)));
    assert_eq!(e.code.as_deref(), Some("ThrottlingException"));

    let e = http_error(400, None, r#"{"message":"Input is too long for requested model."}"#.into());
    assert_eq!(e.message, "Validation error: Input is too long for requested model.");
    assert_eq!((e.kind, e.retryable), (ErrorKind::ContextLength, false));

    let e = http_error(503, None, "<html>gateway</html>".into());
    assert_eq!(e.message, "Service unavailable: HTTP 503");
    assert_eq!((e.kind, e.retryable), (ErrorKind::Overloaded, true));

    let e =
        http_error(429, None, r#"{"code":"ModelNotReadyException","Message":"warming"}"#.into());
    assert_eq!(
        (e.message.as_str(), e.kind, e.retryable),
        ("ModelNotReadyException: warming", ErrorKind::Overloaded, true)
    );

    let e = http_error(
        400,
        None,
        r#"{"__type":"ServiceQuotaExceededException:http://x","message":"quota"}"#.into(),
    );
    assert_eq!((e.kind, e.retryable), (ErrorKind::RateLimited, false));
}

#[test]
fn throttling_text_is_not_a_context_overflow() {
    let e = stream_exception(
        "throttlingException",
        r#"{"message":"Too many tokens, please wait before trying again."}"#,
    );
    assert_eq!(e.kind, ErrorKind::RateLimited);
    assert_eq!(e.status, Some(429));
    let e = stream_exception(
        "modelStreamErrorException",
        r#"{"message":"Input is too long","originalStatusCode":400}"#,
    );
    assert_eq!(e.kind, ErrorKind::ContextLength);
    assert!(!e.retryable);
}
