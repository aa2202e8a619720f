//! The queue that carries a run's events to its stream.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use crate::event::AgentEvent;

/// A run's events on their way from the loop (and its tools' progress sinks,
/// on any thread) to the [`crate::AgentRun`] that yields them.
///
/// One allocation per run, plus a buffer only while events wait: tokio's
/// unbounded channel kept about 900 bytes per run in flight (its channel state
/// and a block of 32 slots), and a run in flight mostly has nothing queued.
#[derive(Clone, Default)]
pub(crate) struct EventQueue {
    inner: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    events: VecDeque<AgentEvent>,
    /// Woken by the next send; set by a reader that found the queue empty.
    reader: Option<Waker>,
    closed: bool,
}

impl EventQueue {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues an event and wakes a waiting reader; dropped once the queue is closed.
    pub(crate) fn send(&self, event: AgentEvent) {
        let reader = {
            let mut state = self.lock();
            if state.closed {
                return;
            }
            state.events.push_back(event);
            state.reader.take()
        };
        if let Some(reader) = reader {
            reader.wake();
        }
    }

    /// How many events wait.
    pub(crate) fn len(&self) -> usize {
        self.lock().events.len()
    }

    /// The oldest event, if any.
    pub(crate) fn try_recv(&self) -> Option<AgentEvent> {
        let mut state = self.lock();
        let event = state.events.pop_front();
        if state.events.is_empty() && state.events.capacity() > 0 {
            // Runs in flight wait with an empty queue: give the buffer back.
            state.events = VecDeque::new();
        }
        event
    }

    /// The oldest event, or `Pending` until the next send wakes `cx`.
    pub(crate) fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<AgentEvent> {
        if let Some(event) = self.try_recv() {
            return Poll::Ready(event);
        }
        let mut state = self.lock();
        // A send between the two locks would have found no reader: look again.
        if let Some(event) = state.events.pop_front() {
            return Poll::Ready(event);
        }
        state.reader = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Drops every queued event and every later one.
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.events = VecDeque::new();
        state.reader = None;
    }
}

#[cfg(test)]
mod tests;
