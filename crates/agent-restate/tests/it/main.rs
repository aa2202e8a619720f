//! agent-restate integration tests: the step interface in process, and durable
//! sessions against a real Restate server on loopback.
#![allow(clippy::disallowed_methods, reason = "tests read their own process environment")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, reason = "tests")]

mod chaos;
mod durable;
mod harness;
mod journal;
mod live;
mod machine;
mod spans;
mod steps;
