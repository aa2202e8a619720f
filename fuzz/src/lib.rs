//! Fuzz targets for clawcall's streaming code: the SSE decoder, the partial-JSON parser and each
//! provider's stream state machine. The target bodies are in [`harness`]; this crate adds a
//! counting global allocator so the targets can check that memory stays bounded.
//!
//! Run with `cargo xtask fuzz` (see `fuzz/README.md`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

pub mod harness;

pub use harness::{Heap, TARGETS};

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting live bytes (requested sizes) and their peak.
pub struct Counting;

fn grow(n: usize) {
    let live = LIVE.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

fn shrink(n: usize) {
    LIVE.fetch_sub(n, Ordering::Relaxed);
}

// SAFETY: every method forwards to `System` unchanged and only updates counters.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grow(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grow(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) };
        shrink(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                grow(new_size - layout.size());
            } else {
                shrink(layout.size() - new_size);
            }
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Heap accounting backed by the counting allocator.
pub const HEAP: Heap = Heap {
    live: || LIVE.load(Ordering::Relaxed),
    peak: || PEAK.load(Ordering::Relaxed),
    reset_peak: || PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed),
};

/// Runs target `name` with the memory checks on; panics on an unknown name.
pub fn fuzz(name: &str, data: &[u8]) {
    assert!(harness::run(name, data, Some(&HEAP)), "unknown fuzz target {name}");
}
