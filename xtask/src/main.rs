//! `cargo xtask <command>`: project automation for clawcall (see `xtask/src/lib.rs`).
#![allow(clippy::disallowed_methods, reason = "a program reads its own process environment")]

use std::process::ExitCode;

use xtask::{conformance, tidy, workspace_root};

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  conformance [--provider NAME] [--scenario PATTERN] [--fixtures DIR]
      replay fixtures/ through every provider over loopback HTTP and print the grid;
      PATTERN matches scenario names (`*` wildcards, otherwise a substring);
      UPDATE_EXPECT=1 rewrites expected.txt files (review the diff);
      --fixtures replays another fixtures folder (default: fixtures/)
  faults [--provider NAME]
      reliability checks over loopback: the fault matrix (faults x providers),
      cancellation at every event index (stream and agent), and the secret scan
      of every fixture (docs/reliability.md)
  tidy [--root DIR]
      repository invariants: crate docs, dependency direction, fixture secrets,
      toolchain pin, fixture coverage (--root checks another checkout)
  ci
      cargo fmt --check, clippy -D warnings, cargo test, conformance, faults, tidy
  fuzz [--smoke] [--target T] [--seconds N] [--update-corpus]
      cargo-fuzz targets in fuzz/ (needs `cargo install cargo-fuzz --locked`):
      build and run each target (or T) for N seconds (default 60; --smoke: every
      target, 5 s each); --update-corpus rewrites the fixture seeds in fuzz/corpus/
  bench [--provider NAME,..] [--scenario text|one-call|three-calls,..] [--sizes 1,4,16] [--reps N] [--svg DIR] [--peer PATH]
      every provider end to end over loopback HTTP on generated streams (100-byte
      deltas): CPU ms per MiB with and without a partial read after every delta,
      the serde_json floor, ratios and peak RSS as a table (docs/benchmarks.md);
      builds and runs itself with --release; not part of ci; --svg DIR also draws
      the CPU per MiB as charts (cpu-per-mib-plain.svg, cpu-per-mib-partial.svg);
      --peer PATH also streams the Chat Completions and Mistral rows through the
      peer program (async-openai, events only) and prints partial / peer per size
  bench-serve PROVIDER SCENARIO
      the bench's body server on loopback: every request gets the stream bench-case
      streams, at the size of its `bytes` query parameter; prints its address,
      serves until standard input ends
  bench --concurrent 100,1000,10000 [--provider NAME] [--reps N] [--modes M,..] [--peer PATH] [--svg DIR]
      N paced small streams at once per provider (transport floor, streams, two-turn
      agent runs, peers through PATH): CPU per stream and event, time to first
      delta, RSS per stream, fds and tasks afterwards; --svg DIR also draws
      cpu-per-stream.svg and rss-per-stream.svg
  bench --structured [--sizes 1,4,16] [--reps N]
      a structured answer streamed in 100-byte fragments through StructuredStream, the
      partial object read after every fragment: ms per MiB against the serde_json floor
  new-provider NAME [--root DIR]
      scaffold crates/llm-NAME (a provider of a small wire format of its own),
      examples/NAME and fixtures/NAME/ (a fixture for every shared scenario it
      declares, the offline claw session) and register it: `cargo xtask ci` passes
      as written; --root writes into another checkout instead of this one
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn wants_help(args: &[String]) -> bool {
    args.iter().any(|a| a == "--help" || a == "-h")
}

fn run(args: &[String]) -> xtask::Result<ExitCode> {
    let Some((command, rest)) = args.split_first() else {
        print!("{USAGE}");
        return Ok(ExitCode::FAILURE);
    };
    if wants_help(rest) || command == "help" || command == "--help" || command == "-h" {
        print!("{USAGE}");
        return Ok(ExitCode::SUCCESS);
    }
    let root = workspace_root();
    match command.as_str() {
        "conformance" => {
            let mut options = conformance::options_from_env(root.join("fixtures"));
            let mut iter = rest.iter();
            while let Some(flag) = iter.next() {
                let value = || -> xtask::Result<String> {
                    Err(xtask::Error::Msg(format!("{flag} needs a value")))
                };
                match flag.as_str() {
                    "--provider" => {
                        options.provider = Some(iter.next().cloned().map_or_else(value, Ok)?)
                    }
                    "--scenario" => {
                        options.scenario = Some(iter.next().cloned().map_or_else(value, Ok)?)
                    }
                    "--fixtures" => {
                        options.fixtures_root = iter.next().cloned().map_or_else(value, Ok)?.into()
                    }
                    other => {
                        return Err(xtask::Error::Msg(format!(
                            "unknown argument `{other}`\n\n{USAGE}"
                        )));
                    }
                }
            }
            let report = conformance::run(&options)?;
            print!("{}", report.render());
            Ok(if report.failed() == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        "faults" => {
            let mut options = xtask::faults::options(root.join("fixtures"));
            match rest {
                [] => {}
                [flag, name] if flag == "--provider" => options.provider = Some(name.clone()),
                _ => {
                    return Err(xtask::Error::Msg(format!(
                        "faults takes [--provider NAME]\n\n{USAGE}"
                    )));
                }
            }
            let report = xtask::faults::run_all(&options)?;
            print!("{}", report.render());
            Ok(if report.failed() == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        "tidy" => {
            let root = match rest {
                [] => root,
                [flag, dir] if flag == "--root" => std::path::PathBuf::from(dir),
                _ => return Err(xtask::Error::Msg(format!("tidy takes no arguments\n\n{USAGE}"))),
            };
            let problems = tidy::check(&root)?;
            for p in &problems {
                println!("{p}");
            }
            if problems.is_empty() {
                println!("tidy: ok");
                Ok(ExitCode::SUCCESS)
            } else {
                println!("tidy: {} problems", problems.len());
                Ok(ExitCode::FAILURE)
            }
        }
        "ci" => {
            no_args(rest)?;
            xtask::ci::run(&root)?;
            Ok(ExitCode::SUCCESS)
        }
        "bench" => {
            let structured = rest.iter().any(|a| a == "--structured");
            let concurrent = rest.iter().any(|a| a == "--concurrent");
            // Checked before the release build runs.
            let options = if structured || concurrent {
                None
            } else {
                Some(xtask::bench::Options::parse(rest)?)
            };
            let concurrent = if concurrent {
                Some(xtask::bench::concurrent::Options::parse(rest)?)
            } else {
                None
            };
            if cfg!(debug_assertions) {
                // Timings of a debug build mean nothing: run the release build instead.
                let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
                let status = std::process::Command::new(cargo)
                    .args(["run", "--release", "--package", "xtask", "--", "bench"])
                    .args(rest)
                    .current_dir(&root)
                    .status()
                    .map_err(|e| xtask::Error::Msg(format!("cannot run cargo: {e}")))?;
                return Ok(if status.success() { ExitCode::SUCCESS } else { ExitCode::FAILURE });
            }
            match (options, concurrent) {
                (Some(options), _) => print!("{}", xtask::bench::run(&options)?),
                (None, Some(concurrent)) => {
                    print!("{}", xtask::bench::concurrent::run(&concurrent)?);
                }
                (None, None) => print!("{}", xtask::structured_bench::run(rest)?),
            }
            Ok(ExitCode::SUCCESS)
        }
        // The paced server of `bench --concurrent` alone, for profiling one case under
        // a tool: prints its address, serves until its standard input ends.
        "bench-concurrent-serve" => {
            let [provider] = rest else {
                return Err(xtask::Error::Msg("bench-concurrent-serve PROVIDER".into()));
            };
            xtask::bench::concurrent::serve_until_stdin_ends(provider)?;
            Ok(ExitCode::SUCCESS)
        }
        // One measured case of `bench --concurrent`, in its own process.
        "bench-concurrent-case" => {
            xtask::bench::concurrent::run_case(rest)?;
            Ok(ExitCode::SUCCESS)
        }
        // The body server of `bench`, every request at the size it names (`?bytes=N`), for
        // the peer program or a profiler: prints its address, serves until stdin ends.
        "bench-serve" => {
            xtask::bench::serve_until_stdin_ends(rest)?;
            Ok(ExitCode::SUCCESS)
        }
        // One measured case of `bench`, in its own process.
        "bench-case" => {
            xtask::bench::run_case(rest)?;
            Ok(ExitCode::SUCCESS)
        }
        "fuzz" => {
            let options = xtask::fuzz::Options::parse(rest)?;
            xtask::fuzz::run(&root, &options)?;
            Ok(ExitCode::SUCCESS)
        }
        "new-provider" => {
            xtask::new_provider::run(rest, &root).map_err(|e| xtask::Error::Msg(e.to_string()))?;
            Ok(ExitCode::SUCCESS)
        }
        other => Err(xtask::Error::Msg(format!("unknown command `{other}`\n\n{USAGE}"))),
    }
}

fn no_args(rest: &[String]) -> xtask::Result<()> {
    match rest.first() {
        None => Ok(()),
        Some(a) => Err(xtask::Error::Msg(format!("unexpected argument `{a}`"))),
    }
}
