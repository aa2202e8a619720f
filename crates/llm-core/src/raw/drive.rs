//! The async request driver shared by every HTTP provider (feature `tokio`).
//!
//! A provider supplies two things: a `connect` closure (send the request, return
//! the body bytes or a mapped [`Error`]; the `llm-http` crate has the one HTTP
//! implementation) and a [`StreamDecoder`] (its `stream.rs`: frames of its [`Framing`] in,
//! [`Delta`]s out; every SSE [`WireDecoder`] is one, and AWS event streams are another
//! framing).
//! The driver owns everything else, identically for all providers: retries with
//! backoff before the first content (after it, a retry would repeat shown output), connect / first-byte / idle /
//! total timeouts, cancellation, framing errors, and one `tracing` span per request.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use futures_util::{FutureExt, StreamExt};

use crate::CancellationToken;
use crate::error::{Error, ErrorKind};
use crate::event::Delta;
use crate::options::{RetryPolicy, Sleeper, StreamOptions, Timeouts};
use crate::raw::framing::Framing;
use crate::raw::sse::{SseDecoder, SseEvent};
use crate::raw::wire_text::SurrogateJoiner;
use crate::stream::AssistantStream;
use crate::telemetry::{self, Semconv};
use crate::types::{Model, StopReason};

/// Bytes of a read handed to the framing at a time, at least (see [`pieces`]).
const FRAMING_PIECE: usize = 1024;

/// `bytes` cut into the pieces the framing takes one at a time, each of at least
/// [`FRAMING_PIECE`] bytes (the last one: the rest). For a framing of lines
/// ([`Framing::LINES`]) a piece ends with the line break that ends the line running there, so
/// a line inside one read is framed from the read itself, never assembled again from pieces
/// (a 5 KB event in one read took four growing copies); otherwise it ends there.
fn pieces(bytes: &[u8], lines: bool) -> impl Iterator<Item = &[u8]> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = match rest.get(FRAMING_PIECE..) {
            Some(tail) if lines => {
                FRAMING_PIECE
                    + crate::raw::sse::find_any(tail, [b'\n']).map_or(tail.len(), |i| i + 1)
            }
            Some(_) => FRAMING_PIECE,
            None => rest.len(),
        };
        let (piece, after) = rest.split_at(end.min(rest.len()));
        rest = after;
        Some(piece)
    })
}

/// Response body bytes as they arrive.
pub type ByteStream = BoxStream<'static, Result<Bytes, Error>>;

/// A successful (2xx) HTTP response.
pub struct HttpResponse {
    /// HTTP status.
    pub status: u16,
    /// The body.
    pub body: ByteStream,
}

impl std::fmt::Debug for HttpResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpResponse").field("status", &self.status).finish_non_exhaustive()
    }
}

/// A provider's stream state machine: decoded SSE events in, neutral deltas out.
///
/// Implementations are pure (no IO) and must never panic on any input; a wire
/// error becomes [`Delta::Error`]. The decoder must emit [`Delta::Done`] or
/// [`Delta::Error`] itself when the wire says the response is complete (or at
/// [`WireDecoder::end`] for APIs without a terminator); a body that ends without
/// either becomes a `truncated` error.
pub trait WireDecoder: Send + 'static {
    /// One SSE event.
    fn event(&mut self, event: SseEvent, out: &mut Vec<Delta>);
    /// The body ended.
    fn end(&mut self, out: &mut Vec<Delta>);
    /// The joiner of surrogate halves split across events, for a decoder that reads its text
    /// as [`WireText`](crate::raw::WireText): the driver settles it after every event and at the
    /// end ([`decode_frame`]), so a half whose block or stream ends becomes U+FFFD there.
    fn surrogates(&mut self) -> Option<&mut SurrogateJoiner> {
        None
    }
}

/// A provider's stream state machine over the frames of its API's [`Framing`]: what the
/// driver runs.
///
/// The same contract as [`WireDecoder`] (pure, never panics, emits the terminal delta
/// itself); every [`WireDecoder`] is one, with SSE framing. A decoder over another framing
/// (AWS event streams) implements this trait directly.
pub trait StreamDecoder: Send + 'static {
    /// How the body splits into frames.
    type Framing: Framing;
    /// The framing of one attempt's body (`max_event_bytes` from the options).
    fn framing(max_event_bytes: Option<usize>) -> Self::Framing;
    /// One frame.
    fn frame(&mut self, frame: <Self::Framing as Framing>::Frame, out: &mut Vec<Delta>);
    /// The body ended.
    fn end(&mut self, out: &mut Vec<Delta>);
    /// As [`WireDecoder::surrogates`].
    fn surrogates(&mut self) -> Option<&mut SurrogateJoiner> {
        None
    }
}

/// Decodes one frame as the driver does: the decoder's deltas, then the surrogate halves
/// its blocks or the stream ended with turned into U+FFFD ([`SurrogateJoiner::settle`]).
pub fn decode_frame<D: StreamDecoder>(
    decoder: &mut D,
    frame: <D::Framing as Framing>::Frame,
    out: &mut Vec<Delta>,
) {
    let from = out.len();
    decoder.frame(frame, out);
    if let Some(joiner) = decoder.surrogates() {
        joiner.settle(out, from);
    }
}

/// Ends a body as the driver does: [`StreamDecoder::end`], then the surrogate halves still
/// waiting settled.
pub fn decode_end<D: StreamDecoder>(decoder: &mut D, out: &mut Vec<Delta>) {
    let from = out.len();
    decoder.end(out);
    if let Some(joiner) = decoder.surrogates() {
        joiner.settle(out, from);
    }
}

/// [`decode_frame`] for an SSE decoder behind a pointer (`dyn WireDecoder`).
pub fn decode_event<D: WireDecoder + ?Sized>(
    decoder: &mut D,
    event: SseEvent,
    out: &mut Vec<Delta>,
) {
    let from = out.len();
    decoder.event(event, out);
    if let Some(joiner) = decoder.surrogates() {
        joiner.settle(out, from);
    }
}

/// [`decode_end`] for an SSE decoder behind a pointer (`dyn WireDecoder`).
pub fn decode_sse_end<D: WireDecoder + ?Sized>(decoder: &mut D, out: &mut Vec<Delta>) {
    let from = out.len();
    decoder.end(out);
    if let Some(joiner) = decoder.surrogates() {
        joiner.settle(out, from);
    }
}

impl<D: WireDecoder> StreamDecoder for D {
    type Framing = SseDecoder;

    fn framing(max_event_bytes: Option<usize>) -> SseDecoder {
        match max_event_bytes {
            Some(limit) => SseDecoder::with_max_event_size(limit),
            None => SseDecoder::new(),
        }
    }

    fn frame(&mut self, frame: SseEvent, out: &mut Vec<Delta>) {
        self.event(frame, out);
    }

    fn end(&mut self, out: &mut Vec<Delta>) {
        WireDecoder::end(self, out);
    }

    fn surrogates(&mut self) -> Option<&mut SurrogateJoiner> {
        WireDecoder::surrogates(self)
    }
}

/// Backoff sleeper backed by tokio's timer.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioSleeper;

impl Sleeper for TokioSleeper {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// Runs one streamed request: see the module docs.
///
/// `connect(attempt)` is called once per attempt (0-based); `new_decoder` makes a fresh
/// decoder, and the decoder's framing ([`StreamDecoder::framing`]) gets
/// `options.max_event_bytes`, once per attempt.
pub fn drive<C, Fut, D, N>(
    model: &Model,
    options: &StreamOptions,
    provider: &str,
    connect: C,
    new_decoder: N,
) -> AssistantStream
where
    C: FnMut(u32) -> Fut + Send + 'static,
    Fut: Future<Output = Result<HttpResponse, Error>> + Send + 'static,
    D: StreamDecoder,
    N: FnMut() -> D + Send + 'static,
{
    let span = chat_span(model);
    let driver = Driver {
        connect,
        new_decoder,
        provider: provider.to_owned(),
        provider_name: telemetry::provider_name(model).to_owned(),
        model_id: model.id.clone(),
        policy: options.retry.clone(),
        timeouts: options.timeouts.clone(),
        max_event_bytes: options.max_event_bytes,
        sleeper: options.sleeper.clone().unwrap_or_else(|| Arc::new(TokioSleeper)),
        cancel: options.cancel.clone(),
        attempt: 0,
        phase: Phase::Connect,
        started: Instant::now(),
        emitted_content: false,
        ended: false,
        pending: Vec::new(),
        rng: seed(),
        span: span.clone(),
        last_usage: None,
        seen: Seen::default(),
        idle_timer: None,
        ready: Vec::new(),
    };
    // The driver is boxed: the unfold's state and its future would each reserve room for it.
    let deltas = futures_util::stream::unfold(Box::new(driver), |mut d| async move {
        loop {
            if let Some(delta) = d.ready.pop() {
                return Some((delta, d));
            }
            // Entered while the request works, so the HTTP exchange can name its server on it.
            let span = d.span.clone();
            let mut batch = tracing::Instrument::instrument(d.step(), span).await?;
            batch.reverse();
            d.ready = batch;
        }
    });
    AssistantStream::new(model, &options.cancel, deltas).with_span(span)
}

/// The `chat {model}` span of one request, as the GenAI conventions describe it
/// (`crate::telemetry`): the fields known at the end are declared empty and recorded then.
fn chat_span(model: &Model) -> tracing::Span {
    use tracing::field::Empty;
    let span = tracing::info_span!(
        "chat",
        otel.name = Empty,
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.system = Empty,
        gen_ai.provider.name = Empty,
        gen_ai.request.model = %model.id,
        gen_ai.response.model = Empty,
        gen_ai.response.id = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.response.time_to_first_chunk = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        gen_ai.usage.cache_creation.input_tokens = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.system_instructions = Empty,
        gen_ai.output.messages = Empty,
        "error.type" = Empty,
        server.address = Empty,
        server.port = Empty,
        http.response.status_code = Empty,
        clawcall.retries = 0i64,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("chat {}", model.id));
        let provider = telemetry::provider_name(model);
        match telemetry::semconv() {
            Semconv::Default => span.record("gen_ai.system", provider),
            Semconv::Latest => span.record("gen_ai.provider.name", provider),
        };
    }
    span
}

/// What the response said about itself, for the span and the metrics.
#[derive(Default)]
struct Seen {
    response_id: Option<String>,
    response_model: Option<String>,
    stop: Option<StopReason>,
    first_chunk: Option<Duration>,
}

enum Phase<F: Framing, D> {
    Connect,
    /// Boxed: the step moves the phase out while it awaits a read, and a body state held
    /// inline would be reserved twice in every stream's allocation (in the driver and in
    /// the step's future).
    Body(Box<BodyState<F, D>>),
    Finished,
}

/// A response being read.
struct BodyState<F: Framing, D> {
    body: ByteStream,
    framing: F,
    decoder: D,
    /// The frames of one read, empty between reads: kept so a read allocates none.
    frames: Vec<F::Frame>,
}

struct Driver<C, N, D: StreamDecoder> {
    connect: C,
    new_decoder: N,
    provider: String,
    /// The provider as the GenAI conventions name it, and the model asked for (for metrics).
    provider_name: String,
    model_id: String,
    policy: RetryPolicy,
    timeouts: Timeouts,
    max_event_bytes: Option<usize>,
    sleeper: Arc<dyn Sleeper>,
    cancel: CancellationToken,
    attempt: u32,
    phase: Phase<D::Framing, D>,
    started: Instant,
    emitted_content: bool,
    /// The decoder emitted its terminal delta in this attempt.
    ended: bool,
    pending: Vec<Delta>,
    rng: u64,
    span: tracing::Span,
    last_usage: Option<crate::types::Usage>,
    seen: Seen,
    /// The idle timer of the response being read (see `read_before`).
    idle_timer: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    /// The deltas of the last step not handed on yet, last first (handed on by `pop`). Once
    /// empty, its allocation takes the next read's deltas: a stream under way allocates no
    /// vector per read.
    ready: Vec<Delta>,
}

/// The most deltas whose room [`Driver::ready`] keeps from one read to the next: a read that
/// made more (a large read of many small events) does not hold that room for the rest of
/// the stream.
const READY_KEPT: usize = 16;

enum Outcome {
    Emit(Vec<Delta>),
    Retry(Error),
}

impl<C, Fut, D, N> Driver<C, N, D>
where
    C: FnMut(u32) -> Fut + Send + 'static,
    Fut: Future<Output = Result<HttpResponse, Error>> + Send + 'static,
    D: StreamDecoder,
    N: FnMut() -> D + Send + 'static,
{
    async fn step(&mut self) -> Option<Vec<Delta>> {
        loop {
            if self.cancel.is_cancelled() && !matches!(self.phase, Phase::Finished) {
                return Some(
                    self.finish(vec![Delta::Error(Error::aborted(self.provider.clone()))]),
                );
            }
            match std::mem::replace(&mut self.phase, Phase::Finished) {
                Phase::Finished => return None,
                Phase::Connect => {
                    let fut = (self.connect)(self.attempt);
                    let limit = min_opt(self.timeouts.first_byte, self.remaining());
                    let result = match limit {
                        Some(limit) => match tokio::time::timeout(limit, fut).await {
                            Ok(r) => r,
                            Err(_) => {
                                Err(self.timeout_error("waiting for the response headers", limit))
                            }
                        },
                        None => fut.await,
                    };
                    match result {
                        Ok(response) => {
                            self.span
                                .record("http.response.status_code", i64::from(response.status));
                            self.ended = false;
                            self.phase = Phase::Body(Box::new(BodyState {
                                body: response.body,
                                framing: D::framing(self.max_event_bytes),
                                decoder: (self.new_decoder)(),
                                frames: Vec::new(),
                            }));
                        }
                        Err(error) => {
                            if let Some(status) = error.status {
                                self.span.record("http.response.status_code", i64::from(status));
                            }
                            self.phase = Phase::Connect;
                            if let Some(batch) = self.retry_or_fail(error).await {
                                return Some(batch);
                            }
                        }
                    }
                }
                Phase::Body(mut state) => {
                    let BodyState { body, framing, decoder, frames: events } = &mut *state;
                    let limit = min_opt(self.timeouts.idle, self.remaining());
                    let next = match limit {
                        Some(limit) => {
                            let deadline = tokio::time::Instant::now() + limit;
                            match self.read_before(body, deadline).await {
                                Some(n) => n,
                                None => {
                                    Some(Err(self.timeout_error("waiting for stream data", limit)))
                                }
                            }
                        }
                        None => body.next().await,
                    };
                    let mut out = std::mem::take(&mut self.ready);
                    if out.capacity() > READY_KEPT {
                        out = Vec::new();
                    }
                    // Events completed before a framing error (in the same read) are
                    // decoded first, so the content they carry is kept.
                    let ended = match next {
                        Some(Ok(bytes)) => {
                            // Framed a piece at a time and each piece's frames decoded at once,
                            // so a read's frames are not all alive together: their allocations
                            // are freed and reused while they are still cheap to reuse.
                            for piece in pieces(&bytes, D::Framing::LINES) {
                                let framed = framing.push(piece, events);
                                self.decode(decoder, events, &mut out);
                                if let Err(e) = framed {
                                    out.push(Delta::Error(framing_error(&self.provider, e)));
                                    break;
                                }
                                if self.ended {
                                    break;
                                }
                            }
                            false
                        }
                        Some(Err(error)) => {
                            // A transport failure mid-body: retry only if nothing was shown.
                            out.push(Delta::Error(error));
                            true
                        }
                        None => {
                            let framed = framing.finish(events);
                            self.decode(decoder, events, &mut out);
                            match framed {
                                Err(e) => out.push(Delta::Error(framing_error(&self.provider, e))),
                                Ok(()) if !self.ended => decode_end(decoder, &mut out),
                                Ok(()) => {}
                            }
                            true
                        }
                    };
                    let terminal = out.iter().any(|d| matches!(d, Delta::Done | Delta::Error(_)));
                    self.observe(&out);
                    match self.classify(out) {
                        Outcome::Emit(batch) => {
                            if terminal || ended {
                                return Some(self.finish(batch));
                            }
                            self.phase = Phase::Body(state);
                            if !batch.is_empty() {
                                return Some(batch);
                            }
                        }
                        Outcome::Retry(error) => {
                            self.phase = Phase::Connect;
                            if let Some(batch) = self.retry_or_fail(error).await {
                                return Some(batch);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Decodes `events` in order (each settled, [`decode_frame`]) until one ends the stream:
    /// a decoder is never handed a frame after its terminal delta.
    fn decode(
        &mut self,
        decoder: &mut D,
        events: &mut Vec<<D::Framing as Framing>::Frame>,
        out: &mut Vec<Delta>,
    ) {
        for event in events.drain(..) {
            if self.ended {
                continue;
            }
            let from = out.len();
            decode_frame(decoder, event, out);
            self.ended = out
                .get(from..)
                .unwrap_or_default()
                .iter()
                .any(|d| matches!(d, Delta::Done | Delta::Error(_)));
        }
    }

    /// Holds back metadata until content starts, so a retry stays invisible;
    /// a retryable error before any content becomes a retry.
    fn classify(&mut self, out: Vec<Delta>) -> Outcome {
        if self.emitted_content {
            return Outcome::Emit(out);
        }
        let mut batch = Vec::new();
        for delta in out {
            if let Delta::Usage(u) = &delta {
                self.last_usage = Some(*u);
            }
            if self.emitted_content {
                batch.push(delta);
                continue;
            }
            match delta {
                Delta::Error(error) => {
                    if self.can_retry(&error) {
                        return Outcome::Retry(error);
                    }
                    batch.append(&mut self.pending);
                    batch.push(Delta::Error(error));
                    return Outcome::Emit(batch);
                }
                Delta::Metadata { .. }
                | Delta::Usage(_)
                | Delta::Stop(_)
                | Delta::BlockEnd { .. } => self.pending.push(delta),
                other => {
                    self.emitted_content = true;
                    batch.append(&mut self.pending);
                    batch.push(other);
                }
            }
        }
        Outcome::Emit(batch)
    }

    fn can_retry(&self, error: &Error) -> bool {
        error.retryable
            && self.attempt < self.policy.max_retries
            && !self.cancel.is_cancelled()
            && !self.emitted_content
    }

    /// Sleeps and moves to the next attempt, or returns the final error batch.
    async fn retry_or_fail(&mut self, error: Error) -> Option<Vec<Delta>> {
        if !self.can_retry(&error) {
            let mut batch = std::mem::take(&mut self.pending);
            batch.push(Delta::Error(error));
            return Some(self.finish(batch));
        }
        if self.policy.refuses_wait(error.retry_after) {
            // Fails now rather than sleeping for longer than allowed; the asked wait stays
            // in the error for a caller that wants to come back later.
            let mut error = error;
            let asked = error.retry_after.unwrap_or_default();
            error.message = format!(
                "{} (the server asked to wait {} s before retrying, more than the {} s allowed)",
                error.message,
                asked.as_secs(),
                self.policy.max_retry_after.as_secs()
            );
            let mut batch = std::mem::take(&mut self.pending);
            batch.push(Delta::Error(error));
            return Some(self.finish(batch));
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let random = (self.rng % 10_000) as f64 / 10_000.0;
        let delay = self.policy.delay(self.attempt, error.retry_after, random);
        if let Some(remaining) = self.remaining()
            && delay >= remaining
        {
            let mut batch = std::mem::take(&mut self.pending);
            batch.push(Delta::Error(error));
            return Some(self.finish(batch));
        }
        tracing::warn!(
            parent: &self.span,
            attempt = self.attempt + 1,
            kind = %error.kind,
            status = error.status,
            delay_ms = delay.as_millis() as u64,
            "retrying after error"
        );
        self.pending.clear();
        let sleep = self.sleeper.sleep(delay);
        let cancelled = self.cancel.cancelled();
        futures_util::pin_mut!(cancelled);
        if let futures_util::future::Either::Right(_) =
            futures_util::future::select(sleep, cancelled.fuse()).await
        {
            return Some(self.finish(vec![Delta::Error(Error::aborted(self.provider.clone()))]));
        }
        self.attempt += 1;
        self.span.record("clawcall.retries", i64::from(self.attempt));
        self.phase = Phase::Connect;
        None
    }

    /// Notes what the response says about itself; the first content starts the clock's
    /// second reading (time to first chunk).
    fn observe(&mut self, out: &[Delta]) {
        for delta in out {
            match delta {
                Delta::Metadata { response_id, response_model } => {
                    if response_id.is_some() {
                        self.seen.response_id.clone_from(response_id);
                    }
                    if response_model.is_some() {
                        self.seen.response_model.clone_from(response_model);
                    }
                }
                Delta::Stop(reason) => self.seen.stop = Some(*reason),
                // Usage often comes after the content, in a read of its own.
                Delta::Usage(u) => self.last_usage = Some(*u),
                Delta::Done | Delta::Error(_) | Delta::BlockEnd { .. } => {}
                _ => {
                    if self.seen.first_chunk.is_none() {
                        self.seen.first_chunk = Some(self.started.elapsed());
                    }
                }
            }
        }
    }

    fn finish(&mut self, batch: Vec<Delta>) -> Vec<Delta> {
        self.phase = Phase::Finished;
        let mut error_type = None;
        for d in &batch {
            match d {
                Delta::Usage(u) => self.last_usage = Some(*u),
                Delta::Error(e) => error_type = Some(e.kind.as_str()),
                Delta::Stop(reason) => self.seen.stop = Some(*reason),
                _ => {}
            }
        }
        let latest = telemetry::semconv() == Semconv::Latest;
        let stop = match error_type {
            Some("aborted") => StopReason::Aborted,
            Some(_) => StopReason::Error,
            None => self.seen.stop.unwrap_or_default(),
        };
        let span = &self.span;
        if !span.is_disabled() {
            span.record("gen_ai.response.finish_reasons", telemetry::finish_reason(stop));
            if let Some(id) = &self.seen.response_id {
                span.record("gen_ai.response.id", id.as_str());
            }
            if let Some(model) = &self.seen.response_model {
                span.record("gen_ai.response.model", model.as_str());
            }
            if let Some(kind) = error_type {
                span.record("error.type", kind);
                span.record("otel.status_code", "ERROR");
            }
            if let Some(u) = &self.last_usage {
                span.record(
                    "gen_ai.usage.input_tokens",
                    telemetry::int(telemetry::input_tokens(u)),
                );
                span.record("gen_ai.usage.output_tokens", telemetry::int(u.output));
                if latest {
                    span.record(
                        "gen_ai.usage.cache_read.input_tokens",
                        telemetry::int(u.cache_read),
                    );
                    span.record(
                        "gen_ai.usage.cache_creation.input_tokens",
                        telemetry::int(u.cache_write),
                    );
                }
            }
            if latest && let Some(first) = self.seen.first_chunk {
                span.record("gen_ai.response.time_to_first_chunk", first.as_secs_f64());
            }
        }
        telemetry::record_chat_metrics(&telemetry::ChatMetrics {
            provider: &self.provider_name,
            request_model: &self.model_id,
            response_model: self.seen.response_model.as_deref(),
            error_type,
            duration: self.started.elapsed(),
            usage: self.last_usage.as_ref(),
        });
        batch
    }

    /// The body's next item, or `None` when `deadline` passes first. One timer serves the
    /// whole response: a read leaves it armed, and it is moved on only when it fires before
    /// the current deadline (arming and dropping a timer per read took tokio's timer-wheel
    /// lock twice per read, which the runtime's other worker contends for).
    async fn read_before(
        &mut self,
        body: &mut ByteStream,
        deadline: tokio::time::Instant,
    ) -> Option<Option<Result<Bytes, Error>>> {
        let timer =
            self.idle_timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if timer.deadline() > deadline {
            timer.as_mut().reset(deadline);
        }
        let mut read = body.next();
        loop {
            match futures_util::future::select(&mut read, timer.as_mut()).await {
                futures_util::future::Either::Left((item, _)) => return Some(item),
                futures_util::future::Either::Right(_) => {
                    if tokio::time::Instant::now() >= deadline {
                        return None;
                    }
                    timer.as_mut().reset(deadline);
                }
            }
        }
    }

    fn remaining(&self) -> Option<Duration> {
        self.timeouts.total.map(|t| t.saturating_sub(self.started.elapsed()))
    }

    fn timeout_error(&self, what: &str, limit: Duration) -> Error {
        Error::new(
            ErrorKind::Transport,
            self.provider.clone(),
            format!("Timed out after {} ms {what}", limit.as_millis()),
        )
    }
}

fn min_opt(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

fn framing_error(provider: &str, e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Decode, provider, format!("Malformed event stream: {e}"))
        .with_retryable(false)
}

fn seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or(0);
    nanos | 1
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, reason = "tests")]
mod tests {
    use super::{FRAMING_PIECE, pieces};

    /// The rule, written out byte by byte: from each start, at least `FRAMING_PIECE` bytes,
    /// then up to and including the next `\n`, or the rest.
    fn reference(bytes: &[u8]) -> Vec<&[u8]> {
        let mut out = Vec::new();
        let mut start = 0;
        while start < bytes.len() {
            let mut end = (start + FRAMING_PIECE).min(bytes.len());
            if end < bytes.len() {
                while end < bytes.len() && bytes[end] != b'\n' {
                    end += 1;
                }
                end = (end + 1).min(bytes.len());
            }
            out.push(&bytes[start..end]);
            start = end;
        }
        out
    }

    #[test]
    fn pieces_end_at_the_first_line_break_past_the_minimum() {
        let line = |n: usize| format!("data: {}\n\n", "x".repeat(n));
        let texts = [
            String::new(),
            line(10),
            "y".repeat(FRAMING_PIECE),
            "y".repeat(FRAMING_PIECE + 1),
            "z".repeat(10 * FRAMING_PIECE),
            line(5000),
            (0..200).map(|i| line(i % 97)).collect::<String>(),
            format!("{}{}{}", line(100), line(3000), line(40)),
            format!("{}\n{}", "a".repeat(FRAMING_PIECE - 1), "b".repeat(3000)),
            format!("{}\n{}", "a".repeat(FRAMING_PIECE), "b".repeat(3000)),
            format!("{}\r\n{}\r\n", "a".repeat(2000), "b".repeat(2000)),
        ];
        for text in &texts {
            let got: Vec<&[u8]> = pieces(text.as_bytes(), true).collect();
            assert_eq!(got, reference(text.as_bytes()), "{} bytes", text.len());
            assert_eq!(got.concat(), text.as_bytes());
            // A binary framing's pieces: the read cut every `FRAMING_PIECE` bytes.
            let binary: Vec<&[u8]> = pieces(text.as_bytes(), false).collect();
            assert_eq!(binary, text.as_bytes().chunks(FRAMING_PIECE).collect::<Vec<_>>());
        }
    }
}
