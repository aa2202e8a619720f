//! A runtime-free cancellation token.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};

#[derive(Debug, Default)]
struct Inner {
    cancelled: AtomicBool,
    /// One waker per pending [`Cancelled`] future, by its id: a re-poll replaces its own
    /// entry. (Appending whenever the waker differed grew the list with every poll of a
    /// stream, and each poll scanned it: streaming was quadratic.)
    wakers: Mutex<Wakers>,
    /// Weak, so children that are dropped (one per tool call, say) do not pile up.
    children: Mutex<Vec<Weak<Inner>>>,
}

#[derive(Debug, Default)]
struct Wakers {
    next_id: u64,
    by_id: HashMap<u64, Waker>,
}

/// A cloneable flag that, once set, stays set and wakes every waiter.
///
/// Clones share state. [`CancellationToken::child`] makes a token that is
/// cancelled with its parent but can also be cancelled alone.
#[derive(Debug, Clone, Default)]
pub struct CancellationToken {
    inner: Arc<Inner>,
}

impl CancellationToken {
    /// A fresh, not cancelled token.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels this token and its children; idempotent.
    pub fn cancel(&self) {
        if self.inner.cancelled.swap(true, Ordering::SeqCst) {
            return;
        }
        let wakers = match self.inner.wakers.lock() {
            Ok(mut w) => std::mem::take(&mut w.by_id),
            Err(poisoned) => std::mem::take(&mut poisoned.into_inner().by_id),
        };
        for w in wakers.into_values() {
            w.wake();
        }
        let children = match self.inner.children.lock() {
            Ok(mut c) => std::mem::take(&mut *c),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        };
        for c in children.iter().filter_map(Weak::upgrade) {
            CancellationToken { inner: c }.cancel();
        }
    }

    /// Whether the token is cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// A token cancelled when this one is (or on its own).
    pub fn child(&self) -> CancellationToken {
        let child = CancellationToken::new();
        if self.is_cancelled() {
            child.cancel();
            return child;
        }
        if let Ok(mut c) = self.inner.children.lock() {
            // Prune dead entries whenever the list is full (a dead child's `Weak`
            // keeps its allocation, and a parent with a few children at a time
            // should not hold dozens of dead ones), then keep room for as many
            // pushes as the pruning cost: amortized O(1) per child.
            if c.len() == c.capacity() {
                c.retain(|w| w.strong_count() > 0);
                if c.len() * 2 > c.capacity() {
                    let live = c.len();
                    c.reserve(live);
                }
            }
            c.push(Arc::downgrade(&child.inner));
        }
        // Re-check: the parent may have been cancelled between the two steps.
        if self.is_cancelled() {
            child.cancel();
        }
        child
    }

    /// A future that completes once the token is cancelled.
    pub fn cancelled(&self) -> Cancelled {
        Cancelled { token: self.clone(), id: None, registered: None }
    }
}

/// Future returned by [`CancellationToken::cancelled`].
#[derive(Debug)]
pub struct Cancelled {
    token: CancellationToken,
    /// Its entry in the token's wakers, once polled.
    id: Option<u64>,
    /// A copy of the waker in that entry: a poll by the same task (every event of a stream
    /// polls this future again) then needs neither the lock nor the map.
    registered: Option<Waker>,
}

impl Future for Cancelled {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.token.is_cancelled() {
            return Poll::Ready(());
        }
        // Only this future changes its entry, so the copy says what the entry holds.
        if this.registered.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            return Poll::Pending;
        }
        if let Ok(mut wakers) = this.token.inner.wakers.lock() {
            let id = match this.id {
                Some(id) => id,
                None => {
                    let id = wakers.next_id;
                    wakers.next_id += 1;
                    this.id = Some(id);
                    id
                }
            };
            match wakers.by_id.get_mut(&id) {
                Some(w) if w.will_wake(cx.waker()) => {}
                Some(w) => *w = cx.waker().clone(),
                None => {
                    wakers.by_id.insert(id, cx.waker().clone());
                }
            }
            this.registered = Some(cx.waker().clone());
        }
        if this.token.is_cancelled() { Poll::Ready(()) } else { Poll::Pending }
    }
}

impl Drop for Cancelled {
    fn drop(&mut self) {
        if let Some(id) = self.id
            && let Ok(mut wakers) = self.token.inner.wakers.lock()
        {
            wakers.by_id.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_follows_parent_but_not_back() {
        let parent = CancellationToken::new();
        let a = parent.child();
        let b = parent.child();
        a.cancel();
        assert!(!parent.is_cancelled());
        assert!(!b.is_cancelled());
        parent.cancel();
        assert!(b.is_cancelled());
        assert!(parent.child().is_cancelled());
    }

    #[test]
    fn dropped_children_do_not_accumulate() {
        let parent = CancellationToken::new();
        for _ in 0..10_000 {
            let _child = parent.child();
        }
        let len = parent.inner.children.lock().map(|c| c.len()).unwrap_or(usize::MAX);
        assert!(len <= 64, "children kept: {len}");
        let kept = parent.child();
        parent.cancel();
        assert!(kept.is_cancelled());
    }

    #[test]
    fn a_parent_with_one_child_at_a_time_keeps_few_dead_ones() {
        let parent = CancellationToken::new();
        let live = parent.child();
        for _ in 0..1_000 {
            let _child = parent.child();
        }
        let len = parent.inner.children.lock().map(|c| c.len()).unwrap_or(usize::MAX);
        assert!(len <= 4, "children kept: {len}");
        parent.cancel();
        assert!(live.is_cancelled());
    }

    /// Counts its wakes.
    struct CountingWaker(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn waiting(token: &CancellationToken) -> usize {
        token.inner.wakers.lock().map(|w| w.by_id.len()).unwrap_or(usize::MAX)
    }

    /// Polls by the same task skip the registration; the task is still woken once on
    /// cancellation, and a poll by another task after them moves the entry to it.
    #[test]
    fn repolling_with_the_same_waker_still_wakes_it_and_a_new_task_takes_over() {
        let token = CancellationToken::new();
        let mut future = Box::pin(token.cancelled());
        let same = Arc::new(CountingWaker(0.into()));
        let waker = Waker::from(same.clone());
        for _ in 0..100 {
            assert!(future.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
        }
        assert_eq!(waiting(&token), 1);
        let moved = Arc::new(CountingWaker(0.into()));
        let other = Waker::from(moved.clone());
        assert!(future.as_mut().poll(&mut Context::from_waker(&other)).is_pending());
        assert!(future.as_mut().poll(&mut Context::from_waker(&other)).is_pending());
        token.cancel();
        assert_eq!(moved.0.load(Ordering::SeqCst), 1);
        assert_eq!(same.0.load(Ordering::SeqCst), 0);
        assert!(future.as_mut().poll(&mut Context::from_waker(&waker)).is_ready());

        // The same with the first task only: it is the one woken.
        let token = CancellationToken::new();
        let mut future = Box::pin(token.cancelled());
        let only = Arc::new(CountingWaker(0.into()));
        let waker = Waker::from(only.clone());
        for _ in 0..3 {
            assert!(future.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
        }
        token.cancel();
        assert_eq!(only.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn repolling_with_new_wakers_keeps_one_entry_and_wakes_the_last() {
        let token = CancellationToken::new();
        let mut future = Box::pin(token.cancelled());
        let mut other = Box::pin(token.cancelled());
        let mut last = Arc::new(CountingWaker(0.into()));
        for _ in 0..10_000 {
            // A different waker every poll, as an executor may pass.
            last = Arc::new(CountingWaker(0.into()));
            let waker = Waker::from(last.clone());
            assert!(future.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
        }
        assert_eq!(waiting(&token), 1);
        let first = Arc::new(CountingWaker(0.into()));
        let waker = Waker::from(first.clone());
        assert!(other.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
        assert_eq!(waiting(&token), 2);
        drop(other);
        assert_eq!(waiting(&token), 1, "a dropped future leaves no waker behind");
        token.cancel();
        assert_eq!(last.0.load(Ordering::SeqCst), 1);
        assert_eq!(first.0.load(Ordering::SeqCst), 0);
        let waker = Waker::from(last.clone());
        assert!(future.as_mut().poll(&mut Context::from_waker(&waker)).is_ready());
    }

    #[tokio::test]
    async fn cancelled_future_completes() {
        let t = CancellationToken::new();
        let t2 = t.clone();
        let waiter = tokio::spawn(async move { t2.cancelled().await });
        tokio::task::yield_now().await;
        t.cancel();
        assert!(waiter.await.is_ok());
    }
}
