//! Exports clawcall's GenAI spans and metrics over OTLP/HTTP (protobuf), so an agent built on
//! clawcall shows up in the tracing backend its users already run.
//!
//! clawcall's crates describe their work through `tracing` only (`llm_core::telemetry`:
//! `invoke_agent`, `turn`, `chat {model}`, `execute_tool {name}`, `tools/call {tool}`, and
//! the GenAI client metrics as events). This crate turns them into OpenTelemetry: an
//! [`OtlpExport`] owns the SDK's tracer and meter providers, [`OtlpExport::layer`] is the
//! `tracing-subscriber` layer to add, and [`OtlpExport::shutdown`] sends what is left.
//! Without it, nothing is exported and no layer runs.
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//!
//! # fn main() -> Result<(), clawcall_otel::OtlpError> {
//! let runtime = tokio::runtime::Runtime::new().expect("runtime");
//! let export = clawcall_otel::OtlpExport::start(
//!     "http://127.0.0.1:4318",
//!     "my-agent",
//!     runtime.handle().clone(),
//! )?;
//! let subscriber = tracing_subscriber::registry().with(export.layer());
//! tracing::subscriber::set_global_default(subscriber).expect("one subscriber");
//! // ... run agents ...
//! export.shutdown()?;
//! # Ok(())
//! # }
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

mod http;
mod metrics;

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::registry::LookupSpan;

pub use metrics::GenAiMetricsLayer;

/// How long one export may take (connect, send, answer) before it is given up.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// How often metrics are sent while the program runs (and once more at shutdown).
pub const METRICS_INTERVAL: Duration = Duration::from_secs(30);

/// Why the export could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// The endpoint is not an `http://` or `https://` URL.
    #[error("the OTLP endpoint must be an http:// or https:// URL, not `{0}`")]
    Endpoint(String),
    /// The exporter or its HTTP client could not be built.
    #[error("cannot start the OTLP export: {0}")]
    Build(String),
    /// Spans or metrics left at shutdown could not be sent.
    #[error("the last OTLP export failed: {0}")]
    Shutdown(String),
}

/// The OTLP/HTTP export of one process: the SDK's providers and their exporters.
#[derive(Debug)]
pub struct OtlpExport {
    tracer_provider: SdkTracerProvider,
    meter_provider: SdkMeterProvider,
}

impl OtlpExport {
    /// Starts exporting to `endpoint`, the collector's OTLP/HTTP base URL (such as
    /// `http://127.0.0.1:4318`): spans go to `{endpoint}/v1/traces`, metrics to
    /// `{endpoint}/v1/metrics`, as `service_name`. The requests run on `runtime` through
    /// llm-http's client (the platform's roots, no redirects). A URL with a user or password
    /// is refused: it would be sent with every export and shown in errors.
    pub fn start(
        endpoint: &str,
        service_name: &str,
        runtime: tokio::runtime::Handle,
    ) -> Result<OtlpExport, OtlpError> {
        let base = signal_base(endpoint)?;
        let client = http::RuntimeClient::new(runtime)?;
        let spans = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client.clone())
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(format!("{base}/v1/traces"))
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| OtlpError::Build(e.to_string()))?;
        let metrics = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(format!("{base}/v1/metrics"))
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| OtlpError::Build(e.to_string()))?;
        let resource = Resource::builder().with_service_name(service_name.to_owned()).build();
        let tracer_provider = SdkTracerProvider::builder()
            .with_batch_exporter(spans)
            .with_resource(resource.clone())
            .build();
        let reader = opentelemetry_sdk::metrics::PeriodicReader::builder(metrics)
            .with_interval(METRICS_INTERVAL)
            .build();
        let meter_provider =
            SdkMeterProvider::builder().with_reader(reader).with_resource(resource).build();
        Ok(OtlpExport { tracer_provider, meter_provider })
    }

    /// The layer that exports: clawcall's spans (and other `info` spans and events, as span
    /// events) to the tracer, its metric events ([`llm_core::telemetry::METRICS_TARGET`]) to
    /// the GenAI histograms. Events below `info` are not exported.
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: tracing::Subscriber + for<'span> LookupSpan<'span> + Send + Sync,
    {
        let tracer = self.tracer_provider.tracer("clawcall");
        // The GenAI attributes only: no thread, timing or source-location extras per span.
        let spans = tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_tracked_inactivity(false)
            .with_threads(false)
            .with_location(false)
            .with_target(false)
            .with_filter(filter_fn(|meta| {
                *meta.level() <= tracing::Level::INFO
                    && meta.target() != llm_core::telemetry::METRICS_TARGET
            }));
        let meter = opentelemetry::metrics::MeterProvider::meter(&self.meter_provider, "clawcall");
        spans.and_then(GenAiMetricsLayer::new(&meter))
    }

    /// Sends every span and metric still held and stops the exporters (each waits at most
    /// [`EXPORT_TIMEOUT`]).
    pub fn shutdown(self) -> Result<(), OtlpError> {
        let spans = self.tracer_provider.shutdown_with_timeout(EXPORT_TIMEOUT);
        let metrics = self.meter_provider.shutdown_with_timeout(EXPORT_TIMEOUT);
        spans.and(metrics).map_err(|e| OtlpError::Shutdown(e.to_string()))
    }
}

/// The endpoint without a trailing slash, checked: http(s), and no user or password.
fn signal_base(endpoint: &str) -> Result<String, OtlpError> {
    let url = reqwest::Url::parse(endpoint.trim())
        .map_err(|_| OtlpError::Endpoint(endpoint.to_owned()))?;
    if !matches!(url.scheme(), "http" | "https")
        || url.host_str().is_none()
        || !url.username().is_empty()
        || url.password().is_some()
    {
        // Never echo a password: the scheme and host are enough to see the mistake.
        return Err(OtlpError::Endpoint(format!(
            "{}://{}",
            url.scheme(),
            url.host_str().unwrap_or_default()
        )));
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_checked() {
        assert_eq!(
            signal_base("http://127.0.0.1:4318/").ok().as_deref(),
            Some("http://127.0.0.1:4318")
        );
        assert_eq!(
            signal_base("https://c.example/otlp").ok().as_deref(),
            Some("https://c.example/otlp")
        );
        assert!(signal_base("ftp://c.example").is_err());
        assert!(signal_base("127.0.0.1:4318").is_err());
        let with_password = signal_base("https://me:hunter2@c.example").map(|_| ());
        let shown = with_password.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(!shown.is_empty() && !shown.contains("hunter2"), "{shown}");
    }
}
