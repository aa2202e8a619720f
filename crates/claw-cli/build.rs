//! Embeds every `fixtures/<provider>/agent-session/` into the binary, so an
//! installed `claw` replays from any directory (`$OUT_DIR/sessions.rs`).

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let fixtures = Path::new(&manifest).join("../../fixtures");
    println!("cargo:rerun-if-changed={}", fixtures.display());
    let mut table = String::from(
        "/// Recorded sessions by provider name, embedded at build time.\npub(crate) static SESSIONS: &[(&str, llm_testkit::fixture::Embedded)] = &[\n",
    );
    let mut providers: Vec<_> = std::fs::read_dir(&fixtures)
        .map(|dir| dir.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    providers.sort();
    for provider in providers {
        let session = provider.join("agent-session");
        let Some(name) = provider.file_name().and_then(|n| n.to_str()) else { continue };
        let Ok(entries) = std::fs::read_dir(&session) else { continue };
        println!("cargo:rerun-if-changed={}", session.display());
        let mut files: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
        files.sort();
        let _ = writeln!(
            table,
            "    ({name:?}, llm_testkit::fixture::Embedded {{ name: \"fixtures/{name}/agent-session\", files: &["
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
