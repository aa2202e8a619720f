//! A runtime-free cancellation token.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};

#[derive(Debug, Default)]
struct Inner {
    cancelled: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
    /// Weak, so children that are dropped (one per tool call, say) do not pile up.
    children: Mutex<Vec<Weak<Inner>>>,
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
            Ok(mut w) => std::mem::take(&mut *w),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        };
        for w in wakers {
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
            // Prune dead entries when the list doubles: amortized O(1) per child.
            if c.len() >= 16 && c.len() == c.capacity() {
                c.retain(|w| w.strong_count() > 0);
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
        Cancelled { token: self.clone() }
    }
}

/// Future returned by [`CancellationToken::cancelled`].
#[derive(Debug)]
pub struct Cancelled {
    token: CancellationToken,
}

impl Future for Cancelled {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.token.is_cancelled() {
            return Poll::Ready(());
        }
        if let Ok(mut w) = self.token.inner.wakers.lock()
            && !w.iter().any(|x| x.will_wake(cx.waker()))
        {
            w.push(cx.waker().clone());
        }
        if self.token.is_cancelled() { Poll::Ready(()) } else { Poll::Pending }
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
