//! llm-core's integration tests: one binary, a module per subject.

mod args_done;
mod changed_path;
mod drive_path_rule;
mod fidelity;
mod first_element;
#[cfg(feature = "tokio")]
mod idle;
mod lone_surrogates;
mod partial_json;
mod sse;
mod strict;
mod transform;
mod validation;
