use std::time::Duration;

use llm_http::ResponseHeaders;

use super::*;

/// An HTTP error without headers.
fn plain_http_error(status: u16, retry_after: Option<Duration>, body: String) -> Error {
    http_error(ErrorResponse { status, headers: ResponseHeaders::default(), retry_after, body })
}

#[test]
fn the_error_type_header_wins_over_the_body_and_the_status() {
    let response = |header: &str, body: &str| ErrorResponse {
        status: 400,
        headers: ResponseHeaders::new([("X-Amzn-ErrorType", header)]),
        retry_after: None,
        body: body.into(),
    };
    let e = http_error(response(
        "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/",
        r#"{"__type":"ValidationException","message":"slow down"}"#,
    ));
    assert_eq!(e.message, "Throttling error: slow down");
    assert_eq!(e.code.as_deref(), Some("ThrottlingException"));
    assert_eq!((e.kind, e.status), (ErrorKind::RateLimited, Some(400)));
    // An empty header value falls back to the body.
    let e = http_error(response("", r#"{"__type":"a#ModelErrorException","message":"m"}"#));
    assert_eq!(e.message, "ModelErrorException: m");
}

#[test]
fn http_errors_name_the_exception() {
    let e = plain_http_error(403, None, r#"{"message":"no access"}"#.into());
    assert_eq!(e.message, "AccessDeniedException: no access");
    assert_eq!((e.kind, e.status, e.retryable), (ErrorKind::Auth, Some(403), false));
    assert_eq!(e.body.as_deref(), Some(r#"{"message":"no access"}"#));

    let e = plain_http_error(
        429,
        Some(Duration::from_secs(2)),
        r#"{"__type":"com.amazon.bedrock#ThrottlingException","message":"Too many tokens, please wait"}"#.into(),
    );
    assert_eq!(e.message, "Throttling error: Too many tokens, please wait");
    assert_eq!((e.kind, e.retryable), (ErrorKind::RateLimited, true));
    assert_eq!(e.retry_after, Some(Duration::from_secs(2)));
    assert_eq!(e.code.as_deref(), Some("ThrottlingException"));

    let e = plain_http_error(
        400,
        None,
        r#"{"message":"Input is too long for requested model."}"#.into(),
    );
    assert_eq!(e.message, "Validation error: Input is too long for requested model.");
    assert_eq!((e.kind, e.retryable), (ErrorKind::ContextLength, false));

    let e = plain_http_error(503, None, "<html>gateway</html>".into());
    assert_eq!(e.message, "Service unavailable: HTTP 503");
    assert_eq!((e.kind, e.retryable), (ErrorKind::Overloaded, true));

    let e = plain_http_error(
        429,
        None,
        r#"{"code":"ModelNotReadyException","Message":"warming"}"#.into(),
    );
    assert_eq!(
        (e.message.as_str(), e.kind, e.retryable),
        ("ModelNotReadyException: warming", ErrorKind::Overloaded, true)
    );

    let e = plain_http_error(
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
