//! Replaying a recorded multi-turn session: `llm_testkit::replay`, re-exported for
//! the tools that drive xtask.

pub use llm_testkit::replay::{ReplayServer, Session};
