//! The one error type every provider maps into.

use std::fmt;
use std::time::Duration;

/// What went wrong, independent of the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Missing or rejected credentials (401/403).
    Auth,
    /// Rate limited (429).
    RateLimited,
    /// The provider is overloaded or failing (5xx, 529, `overloaded_error`).
    Overloaded,
    /// The request was rejected as invalid (400, 404, 422).
    InvalidRequest,
    /// The prompt does not fit the context window.
    ContextLength,
    /// Connection, TLS, timeout or reset.
    Transport,
    /// The response could not be decoded (bad JSON, bad UTF-8, bad framing).
    Decode,
    /// The caller cancelled.
    Aborted,
    /// The stream ended without its terminal event.
    Truncated,
    /// The model refused or was blocked (safety, refusal, ...).
    Refused,
    /// The request asks for something the provider or model cannot do.
    Unsupported,
    /// A provider error that fits no other kind.
    Provider,
}

impl ErrorKind {
    /// snake_case name, as stored in `AssistantMessage::error_type`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Auth => "auth",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::Overloaded => "overloaded",
            ErrorKind::InvalidRequest => "invalid_request",
            ErrorKind::ContextLength => "context_length",
            ErrorKind::Transport => "transport",
            ErrorKind::Decode => "decode",
            ErrorKind::Aborted => "aborted",
            ErrorKind::Truncated => "truncated",
            ErrorKind::Refused => "refused",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Provider => "provider",
        }
    }

    /// The kind for an HTTP status code.
    pub fn from_status(status: u16) -> ErrorKind {
        match status {
            401 | 403 => ErrorKind::Auth,
            408 => ErrorKind::Transport,
            429 => ErrorKind::RateLimited,
            400 | 404 | 409 | 413 | 422 => ErrorKind::InvalidRequest,
            500..=599 => ErrorKind::Overloaded,
            _ => ErrorKind::Provider,
        }
    }

    /// Whether a failure of this kind may succeed when retried. A truncated
    /// stream is (a dropped connection); the driver still retries only before
    /// any content was shown.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorKind::RateLimited
                | ErrorKind::Overloaded
                | ErrorKind::Transport
                | ErrorKind::Truncated
        )
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether an HTTP status is worth retrying (408, 409, 429, 5xx, 529).
pub fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429 | 500..=599)
}

/// A provider or transport failure, with everything needed to diagnose it.
///
/// Never contains an API key: provider crates build it from status, body and
/// their own message, and URLs are never included.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{provider}: {kind}{}: {message}", status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
pub struct Error {
    /// What went wrong.
    pub kind: ErrorKind,
    /// Provider name (`anthropic`, `openai`, ...), or `clawcall` for local failures.
    pub provider: String,
    /// Human-readable message (the provider's own message when it gave one).
    pub message: String,
    /// HTTP status, when there was a response.
    pub status: Option<u16>,
    /// Provider error code or type (`overloaded_error`, `rate_limit_exceeded`, ...).
    pub code: Option<String>,
    /// Raw response body, for diagnosis.
    pub body: Option<String>,
    /// Whether retrying may help.
    pub retryable: bool,
    /// Server-requested delay before a retry (`retry-after`, `retry-after-ms`).
    pub retry_after: Option<Duration>,
}

impl Error {
    /// A new error; `retryable` defaults from the kind.
    pub fn new(kind: ErrorKind, provider: impl Into<String>, message: impl Into<String>) -> Self {
        Error {
            kind,
            provider: provider.into(),
            message: message.into(),
            status: None,
            code: None,
            body: None,
            retryable: kind.is_retryable(),
            retry_after: None,
        }
    }

    /// The caller cancelled the request.
    pub fn aborted(provider: impl Into<String>) -> Self {
        Error::new(ErrorKind::Aborted, provider, "Request was aborted")
    }

    /// Sets the HTTP status (and the retry flag from it).
    #[must_use]
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self.retryable = is_retryable_status(status);
        self
    }

    /// Sets the provider error code.
    #[must_use]
    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.code = Some(code.into());
        self
    }

    /// Sets the raw body.
    #[must_use]
    pub fn with_body(mut self, body: impl Into<String>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// Sets the retry flag.
    #[must_use]
    pub fn with_retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    /// Sets the server-requested retry delay.
    #[must_use]
    pub fn with_retry_after(mut self, after: Option<Duration>) -> Self {
        self.retry_after = after;
        self
    }

    /// A model's refusal to answer: `{who} refusal[ (category: C)][: explanation | .]` from
    /// the trimmed, non-empty `category` and `explanation` strings of `details` (the shape
    /// of Claude's `stop_details`, wherever it is served), kind `refused`, code
    /// `provider_refusal`, not retryable.
    pub fn refusal(provider: &str, who: &str, details: Option<&serde_json::Value>) -> Self {
        let field = |name: &str| {
            details
                .and_then(|d| d.get(name))
                .and_then(serde_json::Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
        };
        let category = field("category").map(|c| format!(" (category: {c})")).unwrap_or_default();
        let explanation = field("explanation").map_or_else(|| ".".to_owned(), |e| format!(": {e}"));
        Error::new(ErrorKind::Refused, provider, format!("{who} refusal{category}{explanation}"))
            .with_code("provider_refusal")
            .with_retryable(false)
    }
}

/// Seconds (possibly fractional) as a [`Duration`]: `None` for a negative or NaN value,
/// [`Duration::MAX`] for one too large to represent (never a panic).
pub fn duration_from_secs(secs: f64) -> Option<Duration> {
    if secs.is_nan() || secs < 0.0 {
        return None;
    }
    Some(Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX))
}

/// The wait a server asked for: `retry-after-ms` (milliseconds), else `retry-after`, either
/// delay-seconds or an HTTP date (RFC 9110: IMF-fixdate, or the obsolete RFC 850 and asctime
/// forms).
///
/// A date is read against the response's own `date` header when it has a valid one, so a
/// skewed local clock does not change the wait, else against `now`; a date already past is
/// no wait. Values that are not a wait (negative, NaN, infinite, text) are ignored; a number
/// too large for a `Duration` gives [`Duration::MAX`] (the retry policy caps what it honours).
pub fn parse_retry_after(
    retry_after_ms: Option<&str>,
    retry_after: Option<&str>,
    date: Option<&str>,
    now: std::time::SystemTime,
) -> Option<Duration> {
    let number = |value: &str| value.trim().parse::<f64>().ok().filter(|n| n.is_finite());
    if let Some(wait) =
        retry_after_ms.and_then(number).and_then(|ms| duration_from_secs(ms / 1000.0))
    {
        return Some(wait);
    }
    let value = retry_after?.trim();
    if let Some(secs) = number(value) {
        return duration_from_secs(secs);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let reference = date.and_then(|d| httpdate::parse_http_date(d.trim()).ok()).unwrap_or(now);
    Some(at.duration_since(reference).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1994-11-06 08:49:37 UTC, the date of RFC 9110's examples.
    fn rfc_example_time() -> std::time::SystemTime {
        std::time::UNIX_EPOCH + Duration::from_secs(784_111_777)
    }

    #[test]
    fn retry_after_dates_in_every_rfc_form_are_read_against_the_response_date() {
        let server_now = Some("Sun, 06 Nov 1994 08:49:37 GMT");
        // The local clock is a day ahead of the server's: the server's date decides.
        let skewed = rfc_example_time() + Duration::from_secs(86_400);
        for value in [
            "Sun, 06 Nov 1994 08:49:47 GMT",
            "Sunday, 06-Nov-94 08:49:47 GMT",
            "Sun Nov  6 08:49:47 1994",
        ] {
            assert_eq!(
                parse_retry_after(None, Some(value), server_now, skewed),
                Some(Duration::from_secs(10)),
                "{value}"
            );
        }
        // Without a (valid) date header the local clock is the reference.
        let local = rfc_example_time() + Duration::from_secs(4);
        for date in [None, Some("yesterday"), Some("")] {
            assert_eq!(
                parse_retry_after(None, Some("Sun, 06 Nov 1994 08:49:47 GMT"), date, local),
                Some(Duration::from_secs(6)),
                "{date:?}"
            );
        }
        // A date already past is no wait; one far ahead is kept whole (the policy caps it).
        assert_eq!(
            parse_retry_after(None, Some("Sun, 06 Nov 1994 08:00:00 GMT"), server_now, skewed),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after(None, Some("Fri, 31 Dec 9999 23:59:59 GMT"), server_now, skewed),
            Some(Duration::from_secs(253_402_300_799 - 784_111_777))
        );
        // Not a date: ignored.
        for value in ["Sun, 32 Nov 1994 08:49:47 GMT", "tomorrow", "Sun, 06 Nov 1994"] {
            assert_eq!(parse_retry_after(None, Some(value), server_now, skewed), None, "{value}");
        }
    }

    #[test]
    fn retry_after_numbers_never_panic_and_ms_wins() {
        let now = rfc_example_time();
        let parse = |ms, s| parse_retry_after(ms, s, None, now);
        assert_eq!(parse(Some("1500"), Some("9")), Some(Duration::from_millis(1500)));
        assert_eq!(parse(Some("-1"), Some("9")), Some(Duration::from_secs(9)));
        assert_eq!(parse(Some("junk"), Some("2.5")), Some(Duration::from_millis(2500)));
        assert_eq!(parse(None, Some(" 7 ")), Some(Duration::from_secs(7)));
        assert_eq!(parse(None, Some("1e30")), Some(Duration::MAX));
        assert_eq!(parse(Some("1e300"), None), Some(Duration::MAX));
        assert_eq!(parse(None, Some("18446744073709551616")), Some(Duration::MAX));
        for bad in ["-5", "NaN", "inf", "-inf", "", "5s"] {
            assert_eq!(parse(None, Some(bad)), None, "{bad}");
            assert_eq!(parse(Some(bad), None), None, "{bad}");
        }
        assert_eq!(duration_from_secs(-0.0), Some(Duration::ZERO));
        assert_eq!(duration_from_secs(f64::MAX), Some(Duration::MAX));
        assert_eq!(duration_from_secs(f64::NAN), None);
    }
}
