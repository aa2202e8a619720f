//! Per-request options.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cancel::CancellationToken;

/// An API key. Its `Debug` and `Display` never show the value.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    /// The key itself, for building the auth header. Never log the result.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([REDACTED])")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[REDACTED]")
    }
}

impl From<&str> for ApiKey {
    fn from(s: &str) -> Self {
        ApiKey::new(s)
    }
}

impl From<String> for ApiKey {
    fn from(s: String) -> Self {
        ApiKey::new(s)
    }
}

/// Reasoning effort requested from reasoning models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningLevel {
    /// Smallest budget.
    Minimal,
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
    /// Extra high (only where the model supports it).
    Xhigh,
    /// Maximum.
    Max,
}

impl ReasoningLevel {
    /// Lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningLevel::Minimal => "minimal",
            ReasoningLevel::Low => "low",
            ReasoningLevel::Medium => "medium",
            ReasoningLevel::High => "high",
            ReasoningLevel::Xhigh => "xhigh",
            ReasoningLevel::Max => "max",
        }
    }

    /// OpenClaw's default thinking budget in tokens for budget-based providers.
    pub fn default_budget(self) -> u64 {
        match self {
            ReasoningLevel::Minimal => 1024,
            ReasoningLevel::Low => 2048,
            ReasoningLevel::Medium => 8192,
            ReasoningLevel::High | ReasoningLevel::Xhigh => 16384,
            ReasoningLevel::Max => 32768,
        }
    }
}

/// Prompt-cache retention.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheRetention {
    /// No cache markers.
    None,
    /// The provider's default retention (Anthropic: 5 minutes).
    #[default]
    Short,
    /// Long retention (Anthropic: `ttl: "1h"`, OpenAI: `24h`).
    Long,
}

/// Which tools the model may or must call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// This tool must be called.
    Tool(String),
}

/// Retry policy for failures before any event was emitted (later ones end the stream).
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// Delay before the first retry.
    pub initial_delay: Duration,
    /// Cap on any one computed backoff delay.
    pub max_delay: Duration,
    /// The longest wait a server may ask for (`retry-after`, `retry-after-ms`, a body's
    /// retry delay). A longer one is not waited for: the request fails at once, and the error
    /// keeps the asked wait in [`crate::Error::retry_after`].
    pub max_retry_after: Duration,
    /// Add up to 25% random jitter to computed delays.
    pub jitter: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 2,
            initial_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(60),
            max_retry_after: Duration::from_secs(60),
            jitter: true,
        }
    }
}

impl RetryPolicy {
    /// No retries.
    pub fn none() -> Self {
        RetryPolicy { max_retries: 0, ..RetryPolicy::default() }
    }

    /// Whether a server's asked wait is over [`RetryPolicy::max_retry_after`] (then the
    /// request fails instead of waiting).
    pub fn refuses_wait(&self, retry_after: Option<Duration>) -> bool {
        retry_after.is_some_and(|wait| wait > self.max_retry_after)
    }

    /// Delay before retry number `retry` (0-based): the server's `retry_after` if given
    /// (at most [`RetryPolicy::max_retry_after`]), else exponential backoff capped by
    /// `max_delay`. `random` in `[0, 1)` scales the jitter.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>, random: f64) -> Duration {
        if let Some(wait) = retry_after {
            return wait.min(self.max_retry_after);
        }
        let factor = 2u32.saturating_pow(retry.min(20));
        let d = self.initial_delay.saturating_mul(factor);
        let d = if self.jitter {
            // Checked: a huge configured delay saturates instead of panicking.
            let scaled = d.as_secs_f64() * (1.0 + 0.25 * random.clamp(0.0, 1.0));
            Duration::try_from_secs_f64(scaled).unwrap_or(Duration::MAX)
        } else {
            d
        };
        d.min(self.max_delay)
    }
}

/// Time limits for one request. `None` means no limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeouts {
    /// Establishing the connection.
    pub connect: Option<Duration>,
    /// From sending the request to the response headers.
    pub first_byte: Option<Duration>,
    /// Between two reads of the response body.
    pub idle: Option<Duration>,
    /// The whole request, retries included.
    pub total: Option<Duration>,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Some(Duration::from_secs(30)),
            first_byte: Some(Duration::from_secs(300)),
            idle: Some(Duration::from_secs(300)),
            total: None,
        }
    }
}

/// Waits for a duration. Providers use it for retry backoff so tests can swap
/// in a clock that records delays instead of sleeping.
pub trait Sleeper: Send + Sync + fmt::Debug {
    /// A future that completes after `duration`.
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()>;
}

/// Options for one streamed request. Every field has a sensible default.
#[derive(Debug, Clone, Default)]
pub struct StreamOptions {
    /// API key; providers fall back to nothing (and fail with an auth error) when absent.
    pub api_key: Option<ApiKey>,
    /// Extra headers, merged last over the provider's and the model's.
    pub headers: BTreeMap<String, String>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Output token limit (defaults to the model's).
    pub max_tokens: Option<u64>,
    /// Stop sequences.
    pub stop: Vec<String>,
    /// Reasoning effort; `None` = provider default / off.
    pub reasoning: Option<ReasoningLevel>,
    /// Session id for cache affinity and routing.
    pub session_id: Option<String>,
    /// Prompt-cache key distinct from the session id.
    pub prompt_cache_key: Option<String>,
    /// Prompt-cache retention.
    pub cache_retention: CacheRetention,
    /// Tool choice.
    pub tool_choice: Option<ToolChoice>,
    /// The answer's shape: a JSON Schema the response must match (see
    /// [`crate::output`]). A model that cannot honour it fails the request with an
    /// `unsupported` error before anything is sent.
    pub output: Option<crate::output::OutputFormat>,
    /// Provider-specific options, documented by each provider crate.
    pub provider_options: BTreeMap<String, Value>,
    /// Cancels the request and its stream.
    pub cancel: CancellationToken,
    /// Retries before the first event.
    pub retry: RetryPolicy,
    /// Time limits.
    pub timeouts: Timeouts,
    /// Backoff sleeper; `None` uses the runtime's timer.
    pub sleeper: Option<Arc<dyn Sleeper>>,
    /// Largest accepted server-sent event in bytes; a larger one ends the stream with a
    /// `decode` error, so memory stays bounded. `None`: the SSE decoder's default (16 MiB).
    pub max_event_bytes: Option<usize>,
}

impl StreamOptions {
    /// The key a prompt cache is keyed by: [`StreamOptions::prompt_cache_key`], else the
    /// session id; `None` when that is empty.
    pub fn cache_key(&self) -> Option<&str> {
        self.prompt_cache_key.as_deref().or(self.session_id.as_deref()).filter(|k| !k.is_empty())
    }

    /// [`StreamOptions::provider_options`] read into a provider's typed options `T` (a
    /// `serde` struct, so a mistyped or misspelt option is caught here). The error is an
    /// `invalid_request` of `provider`, not retryable, naming `label` and the option
    /// (`Invalid Bedrock provider option: region: invalid type ...`). Options `T` does not
    /// declare are left to other providers.
    pub fn typed_provider_options<T: serde::de::DeserializeOwned>(
        &self,
        provider: &str,
        label: &str,
    ) -> Result<T, crate::Error> {
        let map: serde_json::Map<String, Value> =
            self.provider_options.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        serde_json::from_value(Value::Object(map)).map_err(|e| {
            // serde names the type, not the field: the first option that fails alone is it.
            let key = self.provider_options.iter().find_map(|(key, value)| {
                let alone = serde_json::Map::from_iter([(key.clone(), value.clone())]);
                serde_json::from_value::<T>(Value::Object(alone)).is_err().then_some(key)
            });
            let what = key.map_or_else(String::new, |key| format!("{key}: "));
            crate::Error::new(
                crate::ErrorKind::InvalidRequest,
                provider,
                format!("Invalid {label} provider option: {what}{e}"),
            )
            .with_retryable(false)
        })
    }
}

impl StreamOptions {
    /// One text option of [`StreamOptions::provider_options`], trimmed, with the same policy as
    /// [`typed_provider_options`](Self::typed_provider_options): absent, `null` or blank is
    /// `None`; anything but a string is an `invalid_request` error of `provider` naming `label`
    /// and `key`. For options read where a typed struct does not fit (one at a time, with
    /// fallbacks to the environment).
    pub fn text_provider_option(
        &self,
        provider: &str,
        label: &str,
        key: &str,
    ) -> Result<Option<String>, crate::Error> {
        match self.provider_options.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim().to_owned()).filter(|s| !s.is_empty())),
            Some(other) => Err(crate::Error::new(
                crate::ErrorKind::InvalidRequest,
                provider,
                format!("Invalid {label} provider option: {key}: expected a string, not {other}"),
            )
            .with_retryable(false)),
        }
    }
}

/// A test clock for backoff: records every requested delay and returns at once.
#[derive(Debug, Default)]
pub struct RecordingSleeper {
    delays: std::sync::Mutex<Vec<Duration>>,
}

impl RecordingSleeper {
    /// A new, empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// The delays requested so far, in order.
    pub fn delays(&self) -> Vec<Duration> {
        self.delays.lock().map(|d| d.clone()).unwrap_or_default()
    }
}

impl Sleeper for RecordingSleeper {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        if let Ok(mut d) = self.delays.lock() {
            d.push(duration);
        }
        Box::pin(std::future::ready(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_key_is_the_prompt_cache_key_else_the_session_id() {
        let with = |key: Option<&str>, session: Option<&str>| StreamOptions {
            prompt_cache_key: key.map(str::to_owned),
            session_id: session.map(str::to_owned),
            ..StreamOptions::default()
        };
        assert_eq!(with(Some("k"), Some("s")).cache_key(), Some("k"));
        assert_eq!(with(None, Some("s")).cache_key(), Some("s"));
        assert_eq!(with(Some(""), Some("s")).cache_key(), None, "an empty key is none");
        assert_eq!(with(None, Some("")).cache_key(), None);
        assert_eq!(with(None, None).cache_key(), None);
    }

    #[test]
    fn keys_never_print() {
        let key = "sk-ant-api03-SECRET-do-not-print";
        let options = StreamOptions { api_key: Some(ApiKey::new(key)), ..StreamOptions::default() };
        for text in [
            format!("{options:?}"),
            format!("{:?}", options.api_key),
            format!("{}", ApiKey::new(key)),
        ] {
            assert!(!text.contains(key), "{text}");
            assert!(!text.contains("SECRET"), "{text}");
        }
        assert_eq!(options.api_key.as_ref().map(ApiKey::expose), Some(key));
    }

    #[test]
    #[allow(clippy::unwrap_used, reason = "tests")]
    fn provider_options_are_typed_and_a_mistyped_one_is_an_invalid_request() {
        #[derive(Debug, Default, PartialEq, Deserialize)]
        #[serde(rename_all = "camelCase", default)]
        struct Acme {
            service_tier: Option<String>,
            flex: Option<bool>,
        }
        let with = |key: &str, value: Value| StreamOptions {
            provider_options: [(key.to_owned(), value)].into(),
            ..StreamOptions::default()
        };
        let typed: Acme =
            with("serviceTier", "flex".into()).typed_provider_options("acme", "Acme").unwrap();
        assert_eq!(typed.service_tier.as_deref(), Some("flex"));
        let error = with("serviceTier", 3.into())
            .typed_provider_options::<Acme>("acme", "Acme")
            .unwrap_err();
        assert_eq!((error.kind, error.retryable), (crate::ErrorKind::InvalidRequest, false));
        assert_eq!(error.provider, "acme");
        assert!(error.message.starts_with("Invalid Acme provider option: "), "{}", error.message);
        // The failing option is named, whatever else the map holds.
        let options = StreamOptions {
            provider_options: [
                ("flex".to_owned(), Value::Bool(true)),
                ("otherProvidersOption".to_owned(), Value::from(7)),
                ("serviceTier".to_owned(), Value::from(3)),
            ]
            .into(),
            ..StreamOptions::default()
        };
        let error = options.typed_provider_options::<Acme>("acme", "Acme").unwrap_err();
        assert!(
            error.message.starts_with("Invalid Acme provider option: serviceTier: invalid type"),
            "{}",
            error.message
        );
        let empty: Acme = StreamOptions::default().typed_provider_options("acme", "Acme").unwrap();
        assert_eq!(empty, Acme::default());
    }

    #[test]
    fn backoff_is_exponential_capped_and_honours_retry_after() {
        let p = RetryPolicy { jitter: false, ..RetryPolicy::default() };
        assert_eq!(p.delay(0, None, 0.5), Duration::from_millis(500));
        assert_eq!(p.delay(1, None, 0.5), Duration::from_millis(1000));
        assert_eq!(p.delay(30, None, 0.5), Duration::from_secs(60));
        assert_eq!(p.delay(0, Some(Duration::from_secs(7)), 0.5), Duration::from_secs(7));
        assert_eq!(p.delay(0, Some(Duration::from_secs(600)), 0.5), Duration::from_secs(60));
        // A server's wait is honoured up to its own cap, not the backoff cap.
        let patient = RetryPolicy {
            max_delay: Duration::from_secs(1),
            max_retry_after: Duration::from_secs(90),
            ..p.clone()
        };
        assert_eq!(patient.delay(0, Some(Duration::from_secs(80)), 0.5), Duration::from_secs(80));
        assert_eq!(patient.delay(9, None, 0.5), Duration::from_secs(1));
        assert!(!patient.refuses_wait(Some(Duration::from_secs(90))));
        assert!(patient.refuses_wait(Some(Duration::from_millis(90_001))));
        assert!(!patient.refuses_wait(None));
        // Absurd configured delays saturate instead of panicking.
        let huge = RetryPolicy {
            initial_delay: Duration::MAX,
            max_delay: Duration::MAX,
            ..RetryPolicy::default()
        };
        assert_eq!(huge.delay(3, None, 0.99), Duration::MAX);
        let j = RetryPolicy::default();
        let d = j.delay(0, None, 0.99);
        assert!(d > Duration::from_millis(500) && d <= Duration::from_millis(625), "{d:?}");
    }
}
