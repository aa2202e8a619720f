//! [`AssistantStream`]: the event stream every provider returns.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::stream::BoxStream;
use futures_util::{Stream, StreamExt};

use crate::assembler::{MessageAssembler, PartialMessage};
use crate::cancel::{CancellationToken, Cancelled};
use crate::error::{Error, ErrorKind};
use crate::event::{AssistantEvent, Delta};
use crate::types::{AssistantMessage, Model, now_millis};

/// A streamed assistant message: a `Stream` of [`AssistantEvent`]s that ends with
/// exactly one terminal event, plus the partial message on demand.
///
/// Cancelling the token given to [`AssistantStream::new`] ends the stream with
/// an `aborted` error event and drops the provider's stream (closing its
/// connection). The cancel is checked before every event: once it is set, no further
/// delta is read, the events already queued from the last one are delivered, and the
/// stream ends with `aborted`, even if that delta had completed the message (only a
/// terminal event already taken stands).
pub struct AssistantStream {
    deltas: Option<BoxStream<'static, Delta>>,
    assembler: MessageAssembler,
    cancel: CancellationToken,
    cancelled: Pin<Box<Cancelled>>,
    /// A terminal event was returned, or the stream was aborted.
    ended: bool,
    /// The request's `chat` span (none for a stream not from the driver).
    span: tracing::Span,
}

impl std::fmt::Debug for AssistantStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AssistantStream").field("partial", &self.assembler.partial()).finish()
    }
}

impl AssistantStream {
    /// Wraps a provider's delta stream for `model`.
    pub fn new(
        model: &Model,
        cancel: &CancellationToken,
        deltas: impl Stream<Item = Delta> + Send + 'static,
    ) -> Self {
        AssistantStream {
            deltas: Some(deltas.boxed()),
            assembler: MessageAssembler::new(model, now_millis()),
            cancel: cancel.clone(),
            cancelled: Box::pin(cancel.cancelled()),
            ended: false,
            span: tracing::Span::none(),
        }
    }

    /// This stream with the span of its request ([`AssistantStream::span`]).
    pub fn with_span(mut self, span: tracing::Span) -> Self {
        self.span = span;
        self
    }

    /// The request's `chat` span (`crate::telemetry`), for a caller that records what only
    /// it knows there, such as the input messages when content is captured; a disabled span
    /// when no subscriber wants it, or the stream did not come from the driver.
    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// A stream that fails at once with `error` (no `start` event).
    pub fn from_error(model: &Model, error: Error) -> Self {
        Self::new(
            model,
            &CancellationToken::new(),
            futures_util::stream::iter([Delta::Error(error)]),
        )
    }

    /// The message as assembled so far, open tool calls with their best-effort
    /// partial arguments: a borrowed view that copies nothing, so reading it after
    /// every event keeps streaming linear (see [`PartialMessage`]).
    ///
    /// A UI that shows arguments as they stream reads only the part each
    /// `toolcall_delta` changed:
    ///
    /// ```
    /// # use llm_core::{AssistantEvent, AssistantStream};
    /// # use futures_util::StreamExt;
    /// # async fn show(mut stream: AssistantStream) {
    /// while let Some(event) = stream.next().await {
    ///     if let AssistantEvent::ToolCallDelta { content_index, changed: Some(pointer), .. } = &event
    ///         && let Some(call) = stream.partial().tool_call(*content_index)
    ///     {
    ///         // `""` is the whole arguments object; `"/content"` one member.
    ///         let part = call.arguments.pointer(pointer);
    ///         # let _ = part;
    ///     }
    /// }
    /// # }
    /// ```
    pub fn partial(&self) -> PartialMessage<'_> {
        self.assembler.partial()
    }

    /// Drains the stream and returns the final message (the error message on failure).
    pub async fn result(mut self) -> AssistantMessage {
        let mut last = None;
        while let Some(event) = self.next().await {
            match event {
                AssistantEvent::Done { message, .. } | AssistantEvent::Error { message, .. } => {
                    last = Some(*message)
                }
                _ => {}
            }
        }
        last.unwrap_or_else(|| self.assembler.partial().to_message())
    }

    fn abort(&mut self) {
        self.deltas = None;
        self.ended = true;
        let provider = self.assembler.partial().provider().to_owned();
        self.assembler.abort(Error::aborted(provider));
    }
}

impl Stream for AssistantStream {
    type Item = AssistantEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AssistantEvent>> {
        let this = &mut *self;
        loop {
            if !this.ended && this.cancel.is_cancelled() {
                this.abort();
            }
            if let Some(event) = this.assembler.next_event() {
                if event.is_terminal() {
                    this.deltas = None;
                    this.ended = true;
                }
                return Poll::Ready(Some(event));
            }
            if this.assembler.is_finished() {
                return Poll::Ready(None);
            }
            if this.cancelled.as_mut().poll(cx).is_ready() {
                this.abort();
                continue;
            }
            let Some(deltas) = this.deltas.as_mut() else {
                return Poll::Ready(None);
            };
            match deltas.poll_next_unpin(cx) {
                Poll::Ready(Some(delta)) => this.assembler.push(delta),
                Poll::Ready(None) => {
                    this.deltas = None;
                    let provider = this.assembler.partial().provider().to_owned();
                    this.assembler.push(Delta::Error(Error::new(
                        ErrorKind::Truncated,
                        provider,
                        "Stream ended without a terminal event",
                    )));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
