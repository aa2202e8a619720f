//! The loopback replay server, from `llm-testkit` (plain tokio TCP, no axum).

pub(crate) use llm_testkit::server::{Chunking, Server, split_stream};
