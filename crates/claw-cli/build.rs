//! Embeds every `sessions/<provider>/` of this crate into the binary, so an
//! installed `claw` replays from any directory (`$OUT_DIR/sessions.rs`). The
//! sessions live in the crate so its package carries them; the conformance suite
//! replays the same files through `fixtures/<provider>/agent-session`, a link here.
#![allow(clippy::disallowed_methods, reason = "a build script reads what cargo gives it")]

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let sessions = Path::new(&manifest).join("sessions");
    println!("cargo:rerun-if-changed={}", sessions.display());
    let mut table = String::from(
        "/// Recorded sessions by provider name, embedded at build time.\npub(crate) static SESSIONS: &[(&str, llm_testkit::fixture::Embedded)] = &[\n",
    );
    let mut providers: Vec<_> = match std::fs::read_dir(&sessions) {
        Ok(dir) => dir.filter_map(Result::ok).map(|e| e.path()).collect(),
        Err(e) => {
            println!("cargo:warning=cannot read {}: {e}", sessions.display());
            std::process::exit(1);
        }
    };
    providers.sort();
    for session in providers {
        let Some(name) = session.file_name().and_then(|n| n.to_str()) else { continue };
        let Ok(entries) = std::fs::read_dir(&session) else { continue };
        println!("cargo:rerun-if-changed={}", session.display());
        let mut files: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
        files.sort();
        let _ = writeln!(
            table,
            "    ({name:?}, llm_testkit::fixture::Embedded {{ name: \"sessions/{name}\", files: &["
        );
        for file in files.iter().filter(|f| f.is_file()) {
            let Some(file_name) = file.file_name().and_then(|n| n.to_str()) else { continue };
            let Ok(absolute) = file.canonicalize() else { continue };
            println!("cargo:rerun-if-changed={}", absolute.display());
            let _ = writeln!(
                table,
                "        ({file_name:?}, include_bytes!({:?})),",
                absolute.display().to_string()
            );
        }
        table.push_str("    ] }),\n");
    }
    table.push_str("];\n");
    let out = std::env::var("OUT_DIR").unwrap_or_default();
    if let Err(e) = std::fs::write(Path::new(&out).join("sessions.rs"), table) {
        println!("cargo:warning=cannot write sessions.rs: {e}");
        std::process::exit(1);
    }
}
