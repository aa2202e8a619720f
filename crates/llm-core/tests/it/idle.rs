//! The driver's idle timeout, on tokio's paused clock: it counts the wait for each read, so a
//! slow stream whose gaps are all shorter lives on, and a stall ends it after the timeout.

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use llm_core::raw::Delta;
use llm_core::raw::drive::{HttpResponse, WireDecoder, drive};
use llm_core::raw::sse::SseEvent;
use llm_core::{AssistantEvent, Error, Model, RetryPolicy, StreamOptions, Timeouts};

/// Each event's data is a text delta; `[DONE]` ends the stream.
struct Echo;

impl WireDecoder for Echo {
    fn event(&mut self, event: SseEvent, out: &mut Vec<Delta>) {
        if event.data == "[DONE]" {
            out.push(Delta::Stop(llm_core::StopReason::Stop));
            out.push(Delta::Done);
        } else {
            out.push(Delta::Text { key: 0, text: event.data });
        }
    }

    fn end(&mut self, _out: &mut Vec<Delta>) {}
}

/// A body that sends `gaps.len()` text events, each after its gap, then `[DONE]` (or, with
/// `stall`, nothing more, ever).
fn body(gaps: Vec<Duration>, stall: bool) -> HttpResponse {
    let events =
        futures_util::stream::iter(gaps.into_iter().enumerate()).then(|(i, gap)| async move {
            tokio::time::sleep(gap).await;
            Ok::<_, Error>(Bytes::from(format!("data: t{i}\n\n")))
        });
    let end: futures_util::stream::BoxStream<'static, Result<Bytes, Error>> = if stall {
        futures_util::stream::pending().boxed()
    } else {
        futures_util::stream::iter([Ok(Bytes::from_static(b"data: [DONE]\n\n"))]).boxed()
    };
    HttpResponse { status: 200, body: events.chain(end).boxed() }
}

/// The events of one driven stream, and when (on the paused clock) it ended.
async fn run(gaps: Vec<Duration>, stall: bool) -> (Vec<AssistantEvent>, Duration) {
    let options = StreamOptions {
        retry: RetryPolicy { max_retries: 0, ..RetryPolicy::default() },
        timeouts: Timeouts { idle: Some(Duration::from_secs(1)), ..Timeouts::default() },
        ..StreamOptions::default()
    };
    let start = tokio::time::Instant::now();
    let mut response = Some(body(gaps, stall));
    let stream = drive(
        &Model::default(),
        &options,
        "test",
        move |_| {
            let response = response.take();
            async move {
                response.ok_or_else(|| {
                    Error::new(llm_core::ErrorKind::Transport, "test", "one attempt")
                })
            }
        },
        || Echo,
    );
    let events: Vec<AssistantEvent> = stream.collect().await;
    (events, start.elapsed())
}

fn texts(events: &[AssistantEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            AssistantEvent::TextDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_stream_whose_every_gap_is_shorter_than_the_idle_timeout_lives_on() {
    // Six gaps of 700 ms: 4.2 s in all, four times the timeout.
    let (events, took) = run(vec![Duration::from_millis(700); 6], false).await;
    assert!(matches!(events.last(), Some(AssistantEvent::Done { .. })), "{events:?}");
    assert_eq!(texts(&events), ["t0", "t1", "t2", "t3", "t4", "t5"]);
    assert_eq!(took, Duration::from_millis(4200));
}

#[tokio::test(start_paused = true)]
async fn a_stall_ends_the_stream_one_timeout_after_the_last_data() {
    let (events, took) = run(vec![Duration::from_millis(700); 3], true).await;
    let Some(AssistantEvent::Error { error, .. }) = events.last() else { panic!("{events:?}") };
    assert!(error.message.contains("waiting for stream data"), "{}", error.message);
    assert_eq!(texts(&events), ["t0", "t1", "t2"]);
    // The last data came at 2.1 s; the timeout counts from then, whatever was armed before.
    let after = took.saturating_sub(Duration::from_millis(2100));
    assert!(after >= Duration::from_secs(1) && after < Duration::from_millis(1100), "{took:?}");
}

#[tokio::test(start_paused = true)]
async fn a_gap_longer_than_the_timeout_ends_the_stream_even_after_short_ones() {
    let mut gaps = vec![Duration::from_millis(300); 4];
    gaps.push(Duration::from_millis(1500));
    let (events, _) = run(gaps, false).await;
    assert!(matches!(events.last(), Some(AssistantEvent::Error { .. })), "{events:?}");
    assert_eq!(texts(&events), ["t0", "t1", "t2", "t3"]);
}
