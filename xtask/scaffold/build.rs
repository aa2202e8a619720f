//! Embeds every file under `template/` (`$OUT_DIR/template.rs`): the scaffold writes
//! them with the provider's name filled in, so adding a template file needs no code.
#![allow(clippy::disallowed_methods, reason = "a build script reads what cargo gives it")]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let template = manifest.join("template");
    println!("cargo:rerun-if-changed={}", template.display());
    let mut files = Vec::new();
    if let Err(e) = walk(&template, &mut files) {
        println!("cargo:warning=cannot read {}: {e}", template.display());
        std::process::exit(1);
    }
    files.sort();
    let mut table = String::from(
        "/// Every template file: its path under the workspace root (with `{{name}}`) and its text.\npub(crate) const TEMPLATE: &[(&str, &str)] = &[\n",
    );
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
        let Ok(relative) = file.strip_prefix(&template) else { continue };
        let relative = relative.to_string_lossy().replace('\\', "/");
        let _ =
            writeln!(table, "    ({relative:?}, include_str!({:?})),", file.display().to_string());
    }
    table.push_str("];\n");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    if let Err(e) = std::fs::write(out.join("template.rs"), table) {
        println!("cargo:warning=cannot write template.rs: {e}");
        std::process::exit(1);
    }
}
