//! `cargo xtask new-provider NAME`: scaffolds a provider crate that passes `cargo xtask ci`
//! as written (docs/adding-a-provider.md).
//!
//! The files are the templates under `template/` (embedded at build time), with the
//! provider's name filled in: `crates/llm-NAME/` (a provider of a small wire format of its
//! own, documented in its `stream.rs`), `examples/NAME/`, and `fixtures/NAME/` with a
//! fixture of that format for every shared scenario its capabilities make apply, and the
//! offline session `claw --provider NAME` replays. Then one line goes above each
//! [`MARKER`] of the registration lists ([`registrations`]).
//!
//! This crate uses the standard library only, so `cargo xtask new-provider` compiles it
//! alone in seconds; its binary is `cargo xtask`'s entry point (`src/main.rs`).
#![allow(clippy::disallowed_methods, reason = "tooling reads its own process environment")]

use std::fmt;
use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/template.rs"));

/// The marker line above which [`scaffold`] registers a new crate in a file.
pub const MARKER: &str = "new-provider: insert above";

/// Why scaffolding failed: what and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// This crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

fn io_error(path: &Path, e: std::io::Error) -> Error {
    Error(format!("{}: {e}", path.display()))
}

/// Checks that `name` can be a provider name: lowercase ASCII letters, digits and
/// single dashes, starting with a letter, and not `core`.
pub fn validate_name(name: &str) -> Result<()> {
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
        && !name.contains("--")
        && name != "core";
    if ok {
        Ok(())
    } else {
        Err(Error(format!(
            "`{name}` is not a provider name: use lowercase letters, digits and dashes (the crate is llm-NAME)"
        )))
    }
}

/// `open-ai2` -> `OpenAi2`.
pub fn camel(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// `template` with `{{name}}` (`acme-ai`), `{{snake}}` (`acme_ai`), `{{Camel}}` (`AcmeAi`)
/// and `{{UPPER}}` (`ACME_AI`) filled in for provider `name`.
pub fn fill(template: &str, name: &str) -> String {
    let snake = name.replace('-', "_");
    template
        .replace("{{name}}", name)
        .replace("{{snake}}", &snake)
        .replace("{{Camel}}", &camel(name))
        .replace("{{UPPER}}", &snake.to_ascii_uppercase())
}

/// Every file the scaffold writes for provider `name`: its path relative to the workspace
/// root (`crates/llm-NAME/src/lib.rs`) and its text, in path order.
pub fn files(name: &str) -> Vec<(String, String)> {
    TEMPLATE.iter().map(|(path, text)| (fill(path, name), fill(text, name))).collect()
}

/// The template's paths, with `{{name}}` where the provider's name goes.
pub fn template_paths() -> impl Iterator<Item = &'static str> {
    TEMPLATE.iter().map(|(path, _)| *path)
}

/// The workspace's version (`[workspace.package]` of `Cargo.toml` at `root`): the version
/// the new crate's workspace dependency names, so a published crate can depend on it.
pub fn workspace_version(root: &Path) -> Result<String> {
    let path = root.join("Cargo.toml");
    let text = std::fs::read_to_string(&path).map_err(|e| io_error(&path, e))?;
    let mut in_package = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_package = line == "[workspace.package]";
        } else if in_package
            && let Some((key, value)) = line.split_once('=')
            && key.trim() == "version"
        {
            return Ok(value.trim().trim_matches('"').to_owned());
        }
    }
    Err(Error(format!("{}: no version in [workspace.package]", path.display())))
}

/// The registration lines for provider `name` at workspace version `version`: `(file under
/// the workspace root, marker, line)`, each inserted above the file's line ending in that
/// marker ([`MARKER`], or [`MARKER`] with a suffix where a file has several lists). These
/// are the only edits outside the new folders: the `clawcall` registry is what claw, xtask
/// and the docs read, and the bench's table names the wire format it generates for the crate.
pub fn registrations(name: &str, version: &str) -> Vec<(&'static str, String, String)> {
    let snake = name.replace('-', "_");
    let camel = camel(name);
    let marker = |suffix: &str| format!("{MARKER}{suffix}");
    vec![
        (
            "Cargo.toml",
            marker(""),
            format!("llm-{name} = {{ path = \"crates/llm-{name}\", version = \"{version}\" }}"),
        ),
        ("crates/clawcall/Cargo.toml", marker(" (default feature)"), format!("    \"{name}\",")),
        (
            "crates/clawcall/Cargo.toml",
            marker(" (feature)"),
            format!("{name} = [\"dep:llm-{name}\"]"),
        ),
        (
            "crates/clawcall/Cargo.toml",
            marker(""),
            format!("llm-{name} = {{ workspace = true, optional = true }}"),
        ),
        (
            "crates/clawcall/src/registry.rs",
            marker(""),
            format!(
                "    #[cfg(feature = \"{name}\")]\n    ProviderEntry::new(&llm_{snake}::INFO, || Arc::new(llm_{snake}::{camel}Provider::new()),\n        |client, _env| Arc::new(llm_{snake}::{camel}Provider::builder().http_client(client).build())),"
            ),
        ),
        (
            "crates/clawcall/src/lib.rs",
            marker(" (re-export)"),
            // A group of its own: rustfmt sorts a group's `use` items, which would move it
            // away from the marker.
            format!("\n#[cfg(feature = \"{name}\")]\npub use llm_{snake};"),
        ),
        (
            "xtask/src/providers.rs",
            marker(" (bench)"),
            // `cargo xtask bench` streams the scaffold's wire format through the new crate.
            format!("    (\"{name}\", BenchFormat::Scaffold),"),
        ),
    ]
}

/// Inserts `line` above the line of `text` that ends with `marker` (keeping its
/// comment style), or `None` when there is no such line.
pub fn insert_above_marker(text: &str, marker: &str, line: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + line.len() + 1);
    let mut done = false;
    for l in text.split_inclusive('\n') {
        if !done && l.trim_end().ends_with(marker) {
            out.push_str(line);
            out.push('\n');
            done = true;
        }
        out.push_str(l);
    }
    done.then_some(out)
}

/// Writes [`files`] under `root` (a workspace root with `fixtures/SCENARIOS.md`) and
/// registers the crate ([`registrations`]). Refuses to overwrite anything, and checks every
/// marker before writing a file; returns the paths written.
pub fn scaffold(root: &Path, name: &str) -> Result<Vec<PathBuf>> {
    validate_name(name)?;
    for dir in [
        format!("crates/llm-{name}"),
        format!("examples/{name}"),
        format!("fixtures/{name}"),
        format!("{SESSIONS}/{name}"),
    ] {
        let dir = root.join(dir);
        if dir.exists() {
            return Err(Error(format!("{} already exists", dir.display())));
        }
    }
    let version = workspace_version(root)?;
    // Several lines may go into one file: each edit applies to the text edited so far.
    let mut edits: Vec<(PathBuf, String)> = Vec::new();
    for (file, marker, line) in registrations(name, &version) {
        let path = root.join(file);
        let text = match edits.iter().position(|(p, _)| *p == path) {
            Some(i) => edits.swap_remove(i).1,
            None => std::fs::read_to_string(&path).map_err(|e| io_error(&path, e))?,
        };
        let edited = insert_above_marker(&text, &marker, &line).ok_or_else(|| {
            Error(format!("{}: no `{marker}` line to register the crate at", path.display()))
        })?;
        edits.push((path, edited));
    }
    // The offline session lives in claw's crate (it ships in claw's package); the fixture
    // folder links to it, so there is one copy.
    let session_fixture = PathBuf::from(format!("fixtures/{name}/agent-session"));
    let mut writes: Vec<(PathBuf, String)> = files(name)
        .into_iter()
        .map(|(path, text)| match Path::new(&path).strip_prefix(&session_fixture) {
            Ok(rest) => (root.join(SESSIONS).join(name).join(rest), text),
            Err(_) => (root.join(path), text),
        })
        .collect();
    writes.extend(edits);
    let mut written = Vec::new();
    for (path, text) in writes {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io_error(parent, e))?;
        }
        std::fs::write(&path, text).map_err(|e| io_error(&path, e))?;
        written.push(path);
    }
    let link = root.join(&session_fixture);
    if let Some(parent) = link.parent() {
        std::fs::create_dir_all(parent).map_err(|e| io_error(parent, e))?;
    }
    link_session(&link, name)?;
    written.push(link);
    Ok(written)
}

/// Where claw's offline sessions live, one folder per provider.
const SESSIONS: &str = "crates/claw-cli/sessions";

#[cfg(unix)]
fn link_session(link: &Path, name: &str) -> Result<()> {
    let target = PathBuf::from(format!("../../{SESSIONS}/{name}"));
    std::os::unix::fs::symlink(&target, link).map_err(|e| io_error(link, e))
}

#[cfg(not(unix))]
fn link_session(link: &Path, name: &str) -> Result<()> {
    Err(Error(format!(
        "{}: link it to {SESSIONS}/{name} by hand (symbolic links are made on Unix only)",
        link.display()
    )))
}

/// `new-provider NAME [--root DIR]`: scaffolds into `root` (or DIR), says what it wrote and
/// formats the new crates with `cargo fmt`.
pub fn run(args: &[String], root: &Path) -> Result<()> {
    let (name, root) = match args {
        [name] => (name, root.to_owned()),
        [name, flag, dir] if flag == "--root" => (name, PathBuf::from(dir)),
        _ => return Err(Error("new-provider takes NAME [--root DIR]".to_owned())),
    };
    let written = scaffold(&root, name)?;
    let registered: Vec<&str> = registrations(name, "").iter().map(|(f, _, _)| *f).collect();
    let mut created = 0;
    for path in &written {
        let relative = path.strip_prefix(&root).unwrap_or(path);
        if registered.iter().any(|f| relative == Path::new(f)) {
            println!("registered in {}", relative.display());
        } else {
            created += 1;
        }
    }
    println!(
        "created {created} files: crates/llm-{name}/, examples/{name}/, fixtures/{name}/ (every shared scenario its capabilities make apply), {SESSIONS}/{name}/ (claw's offline session, linked from fixtures/{name}/agent-session)"
    );
    // The templates are formatted for a short name; a long one may need rewrapping.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let formatted = std::process::Command::new(cargo)
        .args(["fmt", "-p", &format!("llm-{name}"), "-p", &format!("example-{name}")])
        .current_dir(&root)
        .status();
    if !formatted.is_ok_and(|s| s.success()) {
        println!("note: `cargo fmt -p llm-{name} -p example-{name}` failed; run it yourself");
    }
    println!(
        "next: `cargo xtask ci` passes as written; then replace the template wire format with the provider's \
         (crates/llm-{name}/src/{{convert,stream,error}}.rs), record its fixtures under fixtures/{name}/ \
         and list its models in llm_{}::INFO (docs/adding-a-provider.md)",
        name.replace('-', "_")
    );
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(validate_name("open-router").is_ok());
        for bad in ["", "Core", "core", "a_b", "-a", "a-", "a--b", "1a"] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
        assert_eq!(camel("open-router2"), "OpenRouter2");
    }

    #[test]
    fn templates_are_filled() {
        for (path, text) in files("open-router") {
            assert!(!path.contains("{{") && !text.contains("{{"), "{path} still has a placeholder");
        }
        assert!(files("open-router").iter().any(|(p, _)| p == "crates/llm-open-router/src/lib.rs"));
    }

    #[test]
    fn inserts_above_the_first_marker_only() {
        let text = "a\n# new-provider: insert above\nb\n# new-provider: insert above\n";
        let out = insert_above_marker(text, MARKER, "x").unwrap();
        assert_eq!(out, "a\nx\n# new-provider: insert above\nb\n# new-provider: insert above\n");
        assert_eq!(insert_above_marker("a\n", MARKER, "x"), None);
    }
}
