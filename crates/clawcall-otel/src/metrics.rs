//! The GenAI client metrics, from clawcall's metric events.
//!
//! `llm_core::telemetry::record_chat_metrics` emits one `tracing` event per measurement
//! (target [`llm_core::telemetry::METRICS_TARGET`]); this layer records it into the
//! histogram the conventions define, with their unit and bucket boundaries, and the event's
//! other fields as attributes.

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, Meter};
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;

use llm_core::telemetry::{METRIC_OPERATION_DURATION, METRIC_TOKEN_USAGE, METRICS_TARGET};

/// `gen_ai.client.operation.duration` boundaries, in seconds, as the conventions give them.
const DURATION_BOUNDARIES: [f64; 14] =
    [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];

/// `gen_ai.client.token.usage` boundaries, as the conventions give them (powers of 4).
const TOKEN_BOUNDARIES: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];

/// Records clawcall's metric events into the GenAI client histograms.
#[derive(Debug, Clone)]
pub struct GenAiMetricsLayer {
    duration: Histogram<f64>,
    tokens: Histogram<u64>,
}

impl GenAiMetricsLayer {
    /// The layer, with its histograms made on `meter`.
    pub fn new(meter: &Meter) -> Self {
        let duration = meter
            .f64_histogram(METRIC_OPERATION_DURATION)
            .with_unit("s")
            .with_description("GenAI operation duration")
            .with_boundaries(DURATION_BOUNDARIES.to_vec())
            .build();
        let tokens = meter
            .u64_histogram(METRIC_TOKEN_USAGE)
            .with_unit("{token}")
            .with_description("Number of input and output tokens used")
            .with_boundaries(TOKEN_BOUNDARIES.to_vec())
            .build();
        GenAiMetricsLayer { duration, tokens }
    }
}

impl<S: tracing::Subscriber> Layer<S> for GenAiMetricsLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        if event.metadata().target() != METRICS_TARGET {
            return;
        }
        let mut reading = Reading::default();
        event.record(&mut reading);
        match reading.measurement {
            Some(Measurement::Duration(seconds)) => {
                self.duration.record(seconds, &reading.attributes)
            }
            Some(Measurement::Tokens(count)) => self.tokens.record(count, &reading.attributes),
            None => {}
        }
    }
}

enum Measurement {
    Duration(f64),
    Tokens(u64),
}

/// One metric event: its measurement and its attributes.
#[derive(Default)]
struct Reading {
    measurement: Option<Measurement>,
    attributes: Vec<KeyValue>,
}

/// The measurement field's name for `metric`.
fn is_metric(field: &Field, metric: &str) -> bool {
    field.name().strip_prefix("histogram.") == Some(metric)
}

impl Visit for Reading {
    fn record_f64(&mut self, field: &Field, value: f64) {
        if is_metric(field, METRIC_OPERATION_DURATION) {
            self.measurement = Some(Measurement::Duration(value));
        } else {
            self.attributes.push(KeyValue::new(field.name(), value));
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if is_metric(field, METRIC_TOKEN_USAGE) {
            self.measurement = Some(Measurement::Tokens(value));
        } else {
            self.attributes
                .push(KeyValue::new(field.name(), i64::try_from(value).unwrap_or(i64::MAX)));
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.attributes.push(KeyValue::new(field.name(), value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.attributes.push(KeyValue::new(field.name(), value));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.attributes.push(KeyValue::new(field.name(), value.to_owned()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // Metric events carry no message; anything else shown is an attribute.
        if field.name() != "message" {
            self.attributes.push(KeyValue::new(field.name(), format!("{value:?}")));
        }
    }
}
