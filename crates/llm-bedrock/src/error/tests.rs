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
    assert_eq!(e.message, "Service unavailable: HTTP 503: <html>gateway</html>");
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

/// The shared retry table (408, 409, 429, 5xx, 529) decides whatever exception a status
/// carries, the documented one included (`ConflictException` for 409); the other
/// documented statuses are not retried.
#[test]
fn retryable_statuses_follow_the_shared_table() {
    let documented = [
        (408, "ModelTimeoutException"),
        (409, "ConflictException"),
        (429, "ThrottlingException"),
        (500, "InternalServerException"),
        (502, "InternalServerException"),
        (503, "ServiceUnavailableException"),
        (504, "InternalServerException"),
        (529, "InternalServerException"),
        (400, "ValidationException"),
        (401, "UnrecognizedClientException"),
        (403, "AccessDeniedException"),
        (404, "ResourceNotFoundException"),
        (413, "ValidationException"),
        (422, "ValidationException"),
        (424, "ModelErrorException"),
    ];
    for (status, name) in documented {
        let expected = llm_core::error::is_retryable_status(status);
        let bare = plain_http_error(status, None, r#"{"message":"m"}"#.into());
        assert_eq!(bare.retryable, expected, "HTTP {status} without a name");
        let named = http_error(ErrorResponse {
            status,
            headers: ResponseHeaders::new([("x-amzn-ErrorType", format!("{name}:http://x"))]),
            retry_after: None,
            body: r#"{"message":"m"}"#.into(),
        });
        assert_eq!(named.retryable, expected, "HTTP {status} {name}");
        assert_eq!(named.code.as_deref(), Some(name));
    }
}

/// An exception whose kind is retryable (throttled, failing, not ready) is retried whatever
/// status carried it, except a quota.
#[test]
fn a_throttling_exception_is_retried_whatever_its_status() {
    let named = |status: u16, name: &str| {
        http_error(ErrorResponse {
            status,
            headers: ResponseHeaders::new([("x-amzn-ErrorType", name)]),
            retry_after: None,
            body: r#"{"message":"m"}"#.into(),
        })
    };
    for name in ["ThrottlingException", "ServiceUnavailableException", "ModelNotReadyException"] {
        assert!(named(400, name).retryable, "{name}");
    }
    assert!(!named(429, "ServiceQuotaExceededException").retryable);
    assert!(!named(400, "ValidationException").retryable);
    assert!(!named(403, "AccessDeniedException").retryable);
}

fn rejection(status: u16, name: &str, message: &str, date: Option<&str>) -> ErrorResponse {
    let mut headers = vec![("x-amzn-ErrorType".to_owned(), name.to_owned())];
    headers.extend(date.map(|d| ("Date".to_owned(), d.to_owned())));
    ErrorResponse {
        status,
        headers: ResponseHeaders::new(headers),
        retry_after: None,
        body: serde_json::json!({ "message": message }).to_string(),
    }
}

#[test]
fn a_signature_rejected_for_its_time_gives_the_server_time() {
    // 2026-01-01T00:00:00Z, by hand: 56 years of 365 days plus 14 leap days.
    let server = SystemTime::UNIX_EPOCH + Duration::from_secs((56 * 365 + 14) * 86_400);
    let date = "Thu, 01 Jan 2026 00:00:00 GMT";
    let expired = "Signature expired: 20251231T234000Z is now earlier than 20251231T235500Z \
                   (20260101T000000Z - 5 min.)";
    // A stale signature: the clocks agree, the message says why.
    let stale = rejection(403, "InvalidSignatureException", expired, Some(date));
    assert_eq!(skew_rejection(&stale, server), Some(server));
    let future = rejection(
        403,
        "InvalidSignatureException",
        "Signature not yet current: 20260101T010000Z is still later than 20260101T000500Z",
        Some(date),
    );
    assert_eq!(skew_rejection(&future, server), Some(server));
    // A clock an hour off, whatever the message says.
    let skewed = rejection(403, "SignatureDoesNotMatch", "nope", Some(date));
    assert_eq!(skew_rejection(&skewed, server + Duration::from_secs(3600)), Some(server));
    assert_eq!(skew_rejection(&skewed, server - Duration::from_secs(3600)), Some(server));
    // A wrong key with clocks that agree is not a time problem.
    assert_eq!(skew_rejection(&skewed, server + Duration::from_secs(10)), None);
    // No date, an unparsable date, another code or a status that is not 4xx: nothing.
    assert_eq!(
        skew_rejection(&rejection(403, "InvalidSignatureException", expired, None), server),
        None
    );
    let bad_date = rejection(403, "InvalidSignatureException", expired, Some("yesterday"));
    assert_eq!(skew_rejection(&bad_date, server), None);
    let far =
        rejection(403, "InvalidSignatureException", expired, Some("Fri, 31 Dec 9999 23:59:59 GMT"));
    assert_eq!(skew_rejection(&far, server), None, "not a credible server date");
    let denied = rejection(403, "AccessDeniedException", expired, Some(date));
    assert_eq!(skew_rejection(&denied, server), None);
    let server_error = rejection(500, "InvalidSignatureException", expired, Some(date));
    assert_eq!(skew_rejection(&server_error, server), None);
    // It is still an auth error that is not retried by the status table.
    let error = http_error(stale);
    assert_eq!((error.kind, error.retryable), (ErrorKind::Auth, false));
}

proptest::proptest! {
    /// Whatever status, code, message and `Date` a hostile server sends, the skew check
    /// answers without panicking, and only with a credible server time.
    #[test]
    fn the_skew_check_survives_any_response(
        status in 0u16..1000,
        code in proptest::sample::select(vec!["InvalidSignatureException", "RequestExpired", "x"]),
        message in ".{0,80}",
        date in proptest::option::of(".{0,40}|[A-Z][a-z]{2}, [0-9]{2} [A-Z][a-z]{2} [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT"),
        local_secs in 0u64..8_000_000_000,
    ) {
        let local = SystemTime::UNIX_EPOCH + Duration::from_secs(local_secs);
        let response = rejection(status, code, &message, date.as_deref());
        if let Some(server) = skew_rejection(&response, local) {
            let secs = server.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs());
            proptest::prop_assert!(secs.is_ok_and(|s| (946_684_800..7_258_118_400).contains(&s)));
        }
    }
}
