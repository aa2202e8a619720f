#![allow(clippy::unwrap_used, reason = "test")]

use std::task::{Context, Poll};
use std::time::Duration;

use super::EventQueue;
use crate::event::AgentEvent;

fn start(turn: usize) -> AgentEvent {
    AgentEvent::ToolExecutionStart {
        tool_call_id: turn.to_string(),
        tool_name: "t".into(),
        args: serde_json::json!({}),
    }
}

#[test]
fn events_come_out_in_order_and_the_buffer_is_released_when_drained() {
    let queue = EventQueue::default();
    for i in 0..3 {
        queue.send(start(i));
    }
    for i in 0..3 {
        assert_eq!(queue.try_recv(), Some(start(i)));
    }
    assert_eq!(queue.try_recv(), None);
    assert_eq!(queue.lock().events.capacity(), 0, "a drained queue keeps no buffer");
}

#[test]
fn a_closed_queue_drops_what_it_held_and_everything_sent_later() {
    let queue = EventQueue::default();
    queue.send(AgentEvent::TurnStart);
    queue.close();
    assert_eq!(queue.try_recv(), None);
    queue.send(AgentEvent::TurnStart);
    assert_eq!(queue.try_recv(), None);
    let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
    assert_eq!(queue.poll_recv(&mut cx), Poll::Pending);
    assert_eq!(queue.lock().events.capacity(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_from_another_thread_wakes_the_waiting_reader() {
    let queue = EventQueue::default();
    let sender = queue.clone();
    let thread = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        sender.send(AgentEvent::TurnStart);
    });
    let received = tokio::time::timeout(
        Duration::from_secs(5),
        std::future::poll_fn(|cx| queue.poll_recv(cx)),
    )
    .await;
    assert_eq!(received, Ok(AgentEvent::TurnStart));
    thread.join().unwrap();
}
