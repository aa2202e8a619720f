//! `cargo xtask ci`: the whole gate, in order, stopping at the first failure.
//!
//! 0. the test setup: every `.ci/setup-*` script (installs the pinned npm packages the
//!    integration tests run: the MCP reference servers, the Restate server), idempotent
//! 1. `cargo fmt --all --check`
//! 2. `cargo clippy --workspace --all-targets -- -D warnings`
//! 3. `cargo test --workspace`, then llm-bedrock's optional `aws-config` feature (clippy and
//!    tests: no workspace crate turns it on)
//! 4. conformance (this crate's runner, called directly)
//! 5. faults: the fault matrix, cancellation at every index, the secret scan
//! 6. tidy
//! 7. docs: `cargo doc --workspace --no-deps` with warnings as errors (broken intra-doc links)
//! 8. the feature matrix: each feature of each crate on its own (`cargo check`)
//! 9. `cargo package` of every crate without `publish = false`: each packages and builds from
//!    its package

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{Error, Result, conformance, faults, tidy};

enum Step {
    Setup,
    Cargo(&'static [&'static str]),
    /// A cargo command with extra environment variables.
    CargoEnv(&'static [(&'static str, &'static str)], &'static [&'static str]),
    FeatureMatrix,
    Package,
    Conformance,
    Faults,
    Tidy,
}

const STEPS: &[(&str, Step)] = &[
    ("test setup (.ci/setup-*)", Step::Setup),
    ("cargo fmt --all --check", Step::Cargo(&["fmt", "--all", "--check"])),
    (
        "cargo clippy --workspace --all-targets -- -D warnings",
        Step::Cargo(&["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]),
    ),
    ("cargo test --workspace", Step::Cargo(&["test", "--workspace"])),
    // The optional default AWS credential chain, which no workspace crate turns on.
    (
        "cargo clippy -p llm-bedrock --all-targets --features aws-config -- -D warnings",
        Step::Cargo(&[
            "clippy",
            "-p",
            "llm-bedrock",
            "--all-targets",
            "--features",
            "aws-config",
            "--",
            "-D",
            "warnings",
        ]),
    ),
    (
        "cargo test -p llm-bedrock --features aws-config",
        Step::Cargo(&["test", "-p", "llm-bedrock", "--features", "aws-config"]),
    ),
    ("cargo xtask conformance", Step::Conformance),
    ("cargo xtask faults", Step::Faults),
    ("cargo xtask tidy", Step::Tidy),
    (
        "RUSTDOCFLAGS=\"-D warnings\" cargo doc --workspace --no-deps",
        Step::CargoEnv(&[("RUSTDOCFLAGS", "-D warnings")], &["doc", "--workspace", "--no-deps"]),
    ),
    ("feature matrix (cargo check, each feature alone)", Step::FeatureMatrix),
    ("cargo package (every crate without `publish = false`)", Step::Package),
];

fn seconds(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// Runs every step at `root`, printing each step's name and duration.
pub fn run(root: &Path) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let started = Instant::now();
    for (index, (name, step)) in STEPS.iter().enumerate() {
        println!("==> [{}/{}] {name}", index + 1, STEPS.len());
        let step_started = Instant::now();
        let outcome = match step {
            Step::Setup => setup(root),
            Step::Cargo(args) => run_cargo(&cargo, root, &[], args)?,
            Step::CargoEnv(env, args) => run_cargo(&cargo, root, env, args)?,
            Step::FeatureMatrix => feature_matrix(&cargo, root)?,
            Step::Package => package(&cargo, root)?,
            Step::Conformance => {
                let report =
                    conformance::run(&conformance::options_from_env(root.join("fixtures")))?;
                print!("{}", report.render());
                if report.failed() == 0 {
                    Ok(())
                } else {
                    Err(format!("{} cells failed", report.failed()))
                }
            }
            Step::Faults => {
                let report = faults::run_all(&faults::options(root.join("fixtures")))?;
                print!("{}", report.render());
                if report.failed() == 0 {
                    Ok(())
                } else {
                    Err(format!("{} failures", report.failed()))
                }
            }
            Step::Tidy => {
                let problems = tidy::check(root)?;
                for p in &problems {
                    println!("{p}");
                }
                if problems.is_empty() {
                    Ok(())
                } else {
                    Err(format!("{} problems", problems.len()))
                }
            }
        };
        let took = seconds(step_started.elapsed());
        match outcome {
            Ok(()) => println!("==> ok: {name} ({took})\n"),
            Err(why) => {
                return Err(Error::Msg(format!(
                    "ci failed at step {}: `{name}` {why} after {took}",
                    index + 1
                )));
            }
        }
    }
    println!("ci: all {} steps passed in {}", STEPS.len(), seconds(started.elapsed()));
    Ok(())
}

/// Runs `cargo args...` at `root` with `env` added.
fn run_cargo(
    cargo: &str,
    root: &Path,
    env: &[(&str, &str)],
    args: &[&str],
) -> Result<std::result::Result<(), String>> {
    let status = Command::new(cargo)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root)
        .status()
        .map_err(|e| Error::Msg(format!("cannot run {cargo}: {e}")))?;
    Ok(if status.success() { Ok(()) } else { Err(format!("exited with {status}")) })
}

/// `cargo package` of every workspace crate that may be published (the others, whose
/// dependencies need not be on crates.io, are left out): each is packaged and built from its
/// package against the others' packages. Dirty trees are allowed so the gate also runs on
/// uncommitted work; CI's clone is clean.
fn package(cargo: &str, root: &Path) -> Result<std::result::Result<(), String>> {
    // A target directory of its own: there every build of a workspace crate is one of its
    // packages, and cargo never rebuilds a registry crate whose version it has built, so
    // those builds are removed first (the other dependencies stay built).
    let target = root.join("target/package-check");
    let mut args = vec![
        "package".to_owned(),
        "--allow-dirty".to_owned(),
        "--target-dir".to_owned(),
        target.display().to_string(),
    ];
    let mut names = Vec::new();
    for package in workspace_packages(cargo, root)? {
        let unpublished = package
            .get("publish")
            .and_then(|p| p.as_array())
            .is_some_and(|registries| registries.is_empty());
        if let Some(name) = package.get("name").and_then(|n| n.as_str())
            && !unpublished
        {
            let version = package.get("version").and_then(|v| v.as_str()).unwrap_or_default();
            forget_unpacked(name, version);
            names.push(name.to_owned());
            args.extend(["-p".to_owned(), name.to_owned()]);
        }
    }
    forget_built(&target, &names);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    println!("--> cargo {}", args.join(" "));
    run_cargo(cargo, root, &[], &args)
}

/// Removes earlier packages of `name` `version` that cargo unpacked from its local package
/// registries (`$CARGO_HOME/registry/src/-<hash>/`). Cargo never unpacks a registry crate
/// twice, and the version does not change between commits: a package verified once would
/// otherwise be built from its old contents on every later run on the same machine.
fn forget_unpacked(name: &str, version: &str) {
    let home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")));
    let Some(sources) = home.map(|h| h.join("registry/src")) else { return };
    let Ok(registries) = std::fs::read_dir(&sources) else { return };
    for registry in registries.flatten() {
        // Local registries have no host name: `-<hash>`; crates.io's is `index.crates.io-<hash>`.
        if !registry.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        let unpacked = registry.path().join(format!("{name}-{version}"));
        if unpacked.is_dir() {
            let _ = std::fs::remove_dir_all(&unpacked);
        }
    }
}

/// Removes every build of the crates `names` from the target directory `target`.
fn forget_built(target: &Path, names: &[String]) {
    let prefixes: Vec<String> = names
        .iter()
        .flat_map(|n| {
            [
                format!("{n}-"),
                format!("lib{}-", n.replace('-', "_")),
                format!("{}-", n.replace('-', "_")),
            ]
        })
        .collect();
    for dir in [".fingerprint", "deps", "build"] {
        let Ok(entries) = std::fs::read_dir(target.join("debug").join(dir)) else { continue };
        for entry in entries.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            if prefixes.iter().any(|p| file.starts_with(p.as_str())) {
                let path = entry.path();
                let _ = if path.is_dir() {
                    std::fs::remove_dir_all(&path)
                } else {
                    std::fs::remove_file(&path)
                };
            }
        }
    }
}

/// The workspace's packages, as `cargo metadata --no-deps` describes them.
fn workspace_packages(cargo: &str, root: &Path) -> Result<Vec<serde_json::Value>> {
    let output = Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(root)
        .output()
        .map_err(|e| Error::Msg(format!("cannot run cargo metadata: {e}")))?;
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| Error::Msg(format!("cannot parse cargo metadata: {e}")))?;
    Ok(metadata.get("packages").and_then(|p| p.as_array()).cloned().unwrap_or_default())
}

/// Each crate with features builds with none of them and with each alone (what
/// `cargo hack check --each-feature` does), read from `cargo metadata`.
fn feature_matrix(cargo: &str, root: &Path) -> Result<std::result::Result<(), String>> {
    for package in workspace_packages(cargo, root)? {
        let name = package.get("name").and_then(|n| n.as_str()).unwrap_or_default().to_owned();
        let features: Vec<String> = package
            .get("features")
            .and_then(|f| f.as_object())
            .map(|f| f.keys().filter(|k| *k != "default").cloned().collect())
            .unwrap_or_default();
        if features.is_empty() {
            continue;
        }
        let mut sets = vec![String::new()];
        sets.extend(features);
        for set in sets {
            let mut args = vec!["check", "-p", &name, "--no-default-features"];
            if !set.is_empty() {
                args.extend(["--features", &set]);
            }
            println!("--> cargo {}", args.join(" "));
            if let Err(why) = run_cargo(cargo, root, &[], &args)? {
                return Ok(Err(format!("{name} with features [{set}]: {why}")));
            }
        }
    }
    Ok(Ok(()))
}

/// Runs every `.ci/setup-*` script in name order; each is idempotent and says what it did.
fn setup(root: &Path) -> std::result::Result<(), String> {
    let dir = root.join(".ci");
    let mut scripts: Vec<_> = std::fs::read_dir(&dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("setup-"))
        })
        .collect();
    scripts.sort();
    for script in scripts {
        let status = Command::new("bash")
            .arg(&script)
            .current_dir(root)
            .status()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        if !status.success() {
            return Err(format!("{} exited with {status}", script.display()));
        }
    }
    Ok(())
}
