//! `cargo xtask`'s entry point (the alias in `.cargo/config.toml`): `new-provider` runs
//! here, built from the standard library alone, and every other command runs the `xtask`
//! package, which links every provider crate.
#![allow(clippy::disallowed_methods, reason = "a program reads its own process environment")]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    // xtask/scaffold -> the workspace root.
    let root: PathBuf = manifest.ancestors().nth(2).unwrap_or(manifest).to_owned();
    if let Some(("new-provider", rest)) = args.split_first().map(|(c, r)| (c.as_str(), r))
        && !rest.iter().any(|a| a == "--help" || a == "-h")
    {
        return match xtask_scaffold::run(rest, &root) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("xtask: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .args(["run", "--package", "xtask", "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .arg("--")
        .args(&args);
    exec(command)
}

/// Replaces this process with `command` (so its exit status and signals are the command's
/// own), or runs it and passes its status on where a process cannot be replaced.
#[cfg(unix)]
fn exec(mut command: Command) -> ExitCode {
    use std::os::unix::process::CommandExt;
    let error = command.exec();
    eprintln!("xtask: cannot run cargo: {error}");
    ExitCode::FAILURE
}

#[cfg(not(unix))]
fn exec(mut command: Command) -> ExitCode {
    match command.status() {
        Ok(status) => ExitCode::from(status.code().and_then(|c| u8::try_from(c).ok()).unwrap_or(1)),
        Err(e) => {
            eprintln!("xtask: cannot run cargo: {e}");
            ExitCode::FAILURE
        }
    }
}
