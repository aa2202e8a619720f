//! Project automation for clawcall (`cargo xtask <command>`).
fn main() {}
