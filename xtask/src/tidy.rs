//! `cargo xtask tidy`: repository invariants, each also a test.
//!
//! - every crate root (`src/lib.rs`, binaries' `main.rs`) starts with `//!`;
//! - the dependency direction of docs/ARCHITECTURE.md, read from `cargo metadata`:
//!   provider crates depend on no other provider, `tool-planner` or `agent-core`;
//!   `llm-core` depends on no provider and has no HTTP client; `agent-core` and
//!   `tool-planner` use providers only as dev-dependencies; every example depends
//!   on `clawcall` (the front door) and pulls in exactly one provider;
//! - no key-shaped secret in `fixtures/`;
//! - `rust-toolchain.toml`'s channel matches every crate's `rust-version`;
//! - every crate that may be published has its crates.io metadata, docs.rs settings and a
//!   README whose example is a doctest (`check_publishing`);
//! - no crate has a normal dependency on `xtask`, and `claw-cli` pulls in neither
//!   `xtask` nor `axum` (the shipped binary carries no dev tooling);
//! - every provider crate is registered (the `clawcall` registry), has
//!   `fixtures/<name>/` with every shared scenario its capabilities make apply,
//!   and at least one shared scenario that is not skipped;
//! - every provider crate has the one layout ([`PROVIDER_SRC_FILES`] under `src/`,
//!   and no `*_tests.rs` beside them: a module's unit tests live in
//!   `src/<module>/tests.rs`, integration tests in `tests/`);
//! - no pointer to a document outside the repository (the design notes' file names, tracker
//!   numbers, work sessions) and no machine path in [`REFERENCE_DIRS`]: a reader cannot
//!   follow them, so code and docs state the reason itself.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

use crate::{Error, Result, read_to_string, subdirs};

/// HTTP clients and servers `llm-core` must not pull in.
const HTTP_CRATES: &[&str] =
    &["reqwest", "hyper", "hyper-util", "ureq", "isahc", "surf", "curl", "attohttpc"];

#[derive(Debug, Deserialize)]
struct Metadata {
    packages: Vec<Package>,
    workspace_members: Vec<String>,
    resolve: Option<Resolve>,
}

#[derive(Debug, Deserialize)]
struct Package {
    name: String,
    id: String,
    manifest_path: PathBuf,
    rust_version: Option<String>,
    dependencies: Vec<Dependency>,
    targets: Vec<Target>,
    /// `None` when the crate may be published anywhere; `Some([])` for `publish = false`.
    publish: Option<Vec<String>>,
    description: Option<String>,
    license: Option<String>,
    repository: Option<String>,
    readme: Option<PathBuf>,
    #[serde(default)]
    keywords: Vec<String>,
    #[serde(default)]
    categories: Vec<String>,
    metadata: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct Dependency {
    name: String,
    kind: Option<String>,
    /// The features it turns on (`clawcall`'s name the provider crates).
    #[serde(default)]
    features: Vec<String>,
    /// Whether it keeps the dependency's default features.
    #[serde(default = "yes")]
    uses_default_features: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
struct Target {
    kind: Vec<String>,
    src_path: PathBuf,
}

#[derive(Debug, Deserialize)]
struct Resolve {
    nodes: Vec<Node>,
}

#[derive(Debug, Deserialize)]
struct Node {
    id: String,
    deps: Vec<NodeDep>,
}

#[derive(Debug, Deserialize)]
struct NodeDep {
    pkg: String,
    dep_kinds: Vec<DepKind>,
}

#[derive(Debug, Deserialize)]
struct DepKind {
    kind: Option<String>,
}

/// The `llm-*` crates that are not providers: the core, the shared HTTP exchange,
/// the test kit and the conformance suite.
pub const SUPPORT_CRATES: &[&str] = &["llm-core", "llm-http", "llm-testkit", "llm-conformance"];

/// Whether `name` is a provider crate (`llm-*` except [`SUPPORT_CRATES`]).
pub fn is_provider_crate(name: &str) -> bool {
    name.starts_with("llm-") && !SUPPORT_CRATES.contains(&name)
}

/// The files every provider crate has under `src/` (docs/adding-a-provider.md).
pub const PROVIDER_SRC_FILES: &[&str] = &["lib.rs", "convert.rs", "stream.rs", "error.rs"];

/// Crates the shipped `claw` binary must not pull in (dev tooling).
const NOT_IN_CLAW: &[&str] = &["xtask", "axum"];

/// Runs every check on the workspace at `root`; `Ok(problems)` lists what is wrong
/// (empty when tidy), `Err` only when the checks could not run.
pub fn check(root: &Path) -> Result<Vec<String>> {
    let metadata = cargo_metadata(root)?;
    let mut problems = Vec::new();
    check_crate_docs(root, &metadata, &mut problems)?;
    check_publishing(root, &metadata, &mut problems)?;
    check_dependencies(root, &metadata, &mut problems);
    check_toolchain(root, &metadata, &mut problems)?;
    check_fixture_folders(root, &metadata, &mut problems)?;
    for package in members(&metadata).into_iter().filter(|p| is_provider_crate(&p.name)) {
        if let Some(dir) = package.manifest_path.parent() {
            problems.extend(layout_problems(&package.name, dir)?);
        }
    }
    problems.extend(scan_secrets(&root.join("fixtures"))?);
    problems.extend(scan_references(root)?);
    Ok(problems)
}

fn cargo_metadata(root: &Path) -> Result<Metadata> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1"])
        .current_dir(root)
        .output()
        .map_err(|e| Error::Msg(format!("cannot run cargo metadata: {e}")))?;
    if !output.status.success() {
        return Err(Error::Msg(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    serde_json::from_slice(&output.stdout)
        .map_err(|e| Error::Msg(format!("cannot parse cargo metadata: {e}")))
}

fn members(metadata: &Metadata) -> Vec<&Package> {
    let ids: BTreeSet<&str> = metadata.workspace_members.iter().map(String::as_str).collect();
    metadata.packages.iter().filter(|p| ids.contains(p.id.as_str())).collect()
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}

fn check_crate_docs(root: &Path, metadata: &Metadata, problems: &mut Vec<String>) -> Result<()> {
    for package in members(metadata) {
        for target in &package.targets {
            if !target.kind.iter().any(|k| k == "lib" || k == "bin" || k == "proc-macro") {
                continue;
            }
            let text = read_to_string(&target.src_path)?;
            if !text.starts_with("//!") {
                problems.push(format!(
                    "{}: must start with a `//!` crate doc",
                    relative(root, &target.src_path)
                ));
            }
        }
    }
    Ok(())
}

/// Every crate that may be published (no `publish = false`) has what its crates.io and docs.rs
/// pages need: a description, a license, the repository, keywords, categories, the MSRV, a
/// `README.md` named as its readme, docs.rs settings (all features, the `docsrs` cfg), and a
/// library that compiles the README's example as a doctest. A new crate that lacks any of
/// them fails here, or must say `publish = false`.
fn check_publishing(root: &Path, metadata: &Metadata, problems: &mut Vec<String>) -> Result<()> {
    for package in members(metadata) {
        if package.publish.as_ref().is_some_and(Vec::is_empty) {
            continue;
        }
        let name = &package.name;
        let mut missing = Vec::new();
        let empty = |v: &Option<String>| v.as_deref().is_none_or(|t| t.trim().is_empty());
        for (field, absent) in [
            ("description", empty(&package.description)),
            ("license", empty(&package.license)),
            ("repository", empty(&package.repository)),
            ("rust-version", empty(&package.rust_version)),
            ("keywords", package.keywords.is_empty()),
            ("categories", package.categories.is_empty()),
        ] {
            if absent {
                missing.push(field);
            }
        }
        let docs_rs =
            package.metadata.as_ref().and_then(|m| m.get("docs").and_then(|d| d.get("rs")));
        let all_features = docs_rs.and_then(|d| d.get("all-features")).and_then(|v| v.as_bool());
        let docsrs_cfg = docs_rs
            .and_then(|d| d.get("rustdoc-args"))
            .is_some_and(|args| args.to_string().contains("docsrs"));
        if all_features != Some(true) || !docsrs_cfg {
            missing.push("[package.metadata.docs.rs] all-features and rustdoc-args --cfg docsrs");
        }
        let dir = package.manifest_path.parent().unwrap_or(root);
        let readme = dir.join("README.md");
        if package.readme.as_ref().is_none_or(|r| !r.ends_with("README.md")) || !readme.is_file() {
            missing.push("readme = \"README.md\" with the file beside Cargo.toml");
        }
        for target in package.targets.iter().filter(|t| t.kind.iter().any(|k| k == "lib")) {
            let text = read_to_string(&target.src_path)?;
            if !text.contains("include_str!(\"../README.md\")") {
                missing
                    .push("the README included by src/lib.rs (its example compiled as a doctest)");
            }
        }
        if !missing.is_empty() {
            problems.push(format!(
                "{}: crate {name} may be published but lacks {} (or say `publish = false`)",
                relative(root, &package.manifest_path),
                missing.join(", ")
            ));
        }
    }
    Ok(())
}

/// Package ids reachable from `start` through normal (non-dev, non-build) dependencies.
fn normal_closure<'a>(resolve: &'a Resolve, start: &'a str) -> BTreeSet<&'a str> {
    let nodes: BTreeMap<&str, &Node> = resolve.nodes.iter().map(|n| (n.id.as_str(), n)).collect();
    let mut seen = BTreeSet::new();
    let mut stack = vec![start];
    while let Some(id) = stack.pop() {
        let Some(node) = nodes.get(id) else { continue };
        for dep in &node.deps {
            let normal = dep.dep_kinds.is_empty() || dep.dep_kinds.iter().any(|k| k.kind.is_none());
            if normal && seen.insert(dep.pkg.as_str()) {
                stack.push(dep.pkg.as_str());
            }
        }
    }
    seen
}

/// Whether workspace crate `name` may depend on workspace crate `dep` (`dev`: as a
/// dev-dependency only), `None` for a crate with no rule: every member has one, so a new
/// crate states its place in the layers. Arrows point down only: the core, the shared HTTP
/// layer and the test kit, the providers, the planner, the agent, its tools and its hosts.
fn may_depend(name: &str, dep: &str, dev: bool) -> Option<bool> {
    let provider = is_provider_crate(dep);
    // Tests of the crates above the providers run real providers against the test kit.
    let test_support = dev && (provider || dep == "llm-testkit");
    Some(match name {
        "llm-core" => false,
        "llm-http" | "llm-testkit" => dep == "llm-core",
        "tool-planner" => dep == "llm-core" || test_support,
        "agent-core" => matches!(dep, "llm-core" | "tool-planner") || test_support,
        "agent-mcp" => matches!(dep, "llm-core" | "tool-planner" | "agent-core") || test_support,
        // Its example worker names one provider.
        "agent-restate" => matches!(dep, "llm-core" | "agent-core") || provider || test_support,
        // The front door re-exports the user API and every provider.
        "clawcall" => {
            matches!(dep, "llm-core" | "llm-http" | "tool-planner" | "agent-core")
                || provider
                || test_support
                || (dev && dep == "llm-conformance")
        }
        // The conformance suite drives any provider through the test kit's servers.
        "llm-conformance" => {
            matches!(dep, "llm-core" | "llm-http" | "llm-testkit") || (dev && provider)
        }
        // The OTLP export of what the others trace.
        "clawcall-otel" => {
            matches!(dep, "llm-core" | "llm-http" | "agent-core" | "tool-planner") || test_support
        }
        "claw-cli" | "xtask" => dep != "xtask" || name == "xtask",
        // Its tests may run the test kit and the conformance suite on its own fixtures.
        _ if is_provider_crate(name) => {
            matches!(dep, "llm-core" | "llm-http")
                || (dev && matches!(dep, "llm-testkit" | "llm-conformance"))
        }
        _ => return None,
    })
}

fn check_dependencies(root: &Path, metadata: &Metadata, problems: &mut Vec<String>) {
    let names: BTreeMap<&str, &str> =
        metadata.packages.iter().map(|p| (p.id.as_str(), p.name.as_str())).collect();
    let workspace: BTreeSet<&str> = members(metadata).iter().map(|p| p.name.as_str()).collect();
    let examples_dir = root.join("examples");
    // The provider crates each example pulls in (through `clawcall`'s features).
    let mut example_providers: BTreeSet<String> = BTreeSet::new();
    for package in members(metadata) {
        let name = package.name.as_str();
        let example = package.manifest_path.starts_with(&examples_dir);
        let kind_of = |d: &Dependency| d.kind.clone().unwrap_or_else(|| "normal".to_owned());
        for dep in &package.dependencies {
            let dep_name = dep.name.as_str();
            let dev = dep.kind.as_deref() == Some("dev");
            let forbidden = if dep_name == "xtask" {
                name != "xtask"
            } else if name == "llm-core" && dep.kind.is_none() && HTTP_CRATES.contains(&dep_name) {
                true
            } else if !workspace.contains(dep_name) || example {
                false
            } else {
                match may_depend(name, dep_name, dev) {
                    Some(allowed) => !allowed,
                    None => {
                        problems.push(format!(
                            "{name} has no dependency rule: give it its layer in xtask's tidy (`may_depend`)"
                        ));
                        continue;
                    }
                }
            };
            if forbidden {
                problems.push(format!(
                    "{name} must not depend on {dep_name} ({} dependency; see docs/ARCHITECTURE.md)",
                    kind_of(dep)
                ));
            }
        }
        let closure =
            metadata.resolve.as_ref().map(|r| normal_closure(r, &package.id)).unwrap_or_default();
        let closure_names: BTreeSet<&str> =
            closure.iter().filter_map(|id| names.get(id).copied()).collect();
        if name == "claw-cli" {
            for tool in NOT_IN_CLAW {
                if closure_names.contains(tool) {
                    problems.push(format!(
                        "claw-cli must not pull in {tool} (the shipped binary carries no dev tooling)"
                    ));
                }
            }
        }
        if name == "llm-core" {
            for http in HTTP_CRATES {
                if closure_names.contains(http)
                    && !package.dependencies.iter().any(|d| d.name == *http)
                {
                    problems.push(format!(
                        "llm-core must not pull in {http} (through its dependencies)"
                    ));
                }
            }
        }
        if example {
            let direct: BTreeSet<&str> = package
                .dependencies
                .iter()
                .filter(|d| d.kind.is_none())
                .map(|d| d.name.as_str())
                .collect();
            if !direct.contains("clawcall") {
                problems.push(format!("example {name} must depend on clawcall (the front door)"));
            }
            // The resolve graph unifies features over the workspace, so an example's
            // providers are read from what it asks of `clawcall` (and any direct one).
            let mut providers: BTreeSet<String> = BTreeSet::new();
            for dep in package.dependencies.iter().filter(|d| d.kind.is_none()) {
                if is_provider_crate(&dep.name) {
                    providers.insert(dep.name.clone());
                } else if dep.name == "clawcall" {
                    if dep.uses_default_features || dep.features.iter().any(|f| f == "default") {
                        problems.push(format!(
                            "example {name} must take clawcall with `default-features = false` and one provider feature"
                        ));
                    }
                    providers.extend(
                        dep.features.iter().filter(|f| *f != "default").map(|f| format!("llm-{f}")),
                    );
                }
            }
            example_providers.extend(providers.iter().cloned());
            let providers: Vec<String> = providers.into_iter().collect();
            if providers.len() != 1 {
                problems.push(format!(
                    "example {name} must depend on exactly one provider crate (it pulls in {})",
                    if providers.is_empty() { "none".to_owned() } else { providers.join(", ") }
                ));
            }
        }
    }
    // One example per provider crate.
    for provider in members(metadata).iter().filter(|p| is_provider_crate(&p.name)) {
        if !example_providers.contains(&provider.name) {
            problems.push(format!(
                "{} has no example: add examples/{}/ (see docs/adding-a-provider.md)",
                provider.name,
                provider.name.trim_start_matches("llm-")
            ));
        }
    }
    // An example that is not a workspace member escapes every check above.
    if let Ok(dirs) = subdirs(&examples_dir) {
        let manifests: BTreeSet<&Path> =
            members(metadata).iter().map(|p| p.manifest_path.as_path()).collect();
        for (_, dir) in dirs {
            let manifest = dir.join("Cargo.toml");
            if manifest.exists() && !manifests.contains(manifest.as_path()) {
                problems.push(format!(
                    "{}: not a workspace member (add \"examples/*\" to the root Cargo.toml's members)",
                    relative(root, &manifest)
                ));
            }
        }
    }
}

fn check_toolchain(root: &Path, metadata: &Metadata, problems: &mut Vec<String>) -> Result<()> {
    let path = root.join("rust-toolchain.toml");
    let text = read_to_string(&path)?;
    let channel = text.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "channel").then(|| value.trim().trim_matches('"').to_owned())
    });
    let Some(channel) = channel else {
        problems.push("rust-toolchain.toml: no `channel`".to_owned());
        return Ok(());
    };
    for package in members(metadata) {
        match &package.rust_version {
            None => problems.push(format!(
                "{}: no rust-version (use `rust-version.workspace = true`)",
                package.name
            )),
            Some(v) if channel == *v || channel.starts_with(&format!("{v}.")) => {}
            Some(v) => problems.push(format!(
                "{}: rust-version {v} does not match rust-toolchain.toml's channel {channel}",
                package.name
            )),
        }
    }
    Ok(())
}

fn check_fixture_folders(
    root: &Path,
    metadata: &Metadata,
    problems: &mut Vec<String>,
) -> Result<()> {
    let fixtures = root.join("fixtures");
    let providers: BTreeSet<String> = members(metadata)
        .iter()
        .filter(|p| is_provider_crate(&p.name))
        .map(|p| p.name.trim_start_matches("llm-").to_owned())
        .collect();
    for provider in &providers {
        let dir = fixtures.join(provider);
        if !dir.is_dir() {
            problems.push(format!(
                "llm-{provider} has no fixtures/{provider}/ (see docs/adding-a-provider.md)"
            ));
            continue;
        }
        let Some(entry) = crate::providers::PROVIDERS.iter().find(|e| e.name == provider) else {
            problems.push(format!(
                "llm-{provider} is not registered in crates/clawcall/src/registry.rs (cargo xtask new-provider adds it)"
            ));
            continue;
        };
        problems.extend(coverage_problems(&fixtures, entry)?);
    }
    if fixtures.is_dir() {
        for (name, _) in subdirs(&fixtures)? {
            if !providers.contains(&name) {
                problems.push(format!("fixtures/{name}/: no provider crate crates/llm-{name}"));
            }
        }
    }
    Ok(())
}

/// What is wrong with `entry`'s fixture coverage under `fixtures`: a shared scenario
/// its capabilities make apply without a fixture, or every shared scenario skipped.
pub fn coverage_problems(
    fixtures: &Path,
    entry: &crate::conformance::ProviderEntry,
) -> Result<Vec<String>> {
    let shared = crate::shared_scenarios(fixtures)?;
    let needs = crate::scenario_needs(fixtures)?;
    let provider = entry.name;
    let dir = fixtures.join(provider);
    let mut problems = Vec::new();
    let mut applying = 0;
    for scenario in &shared {
        let s = dir.join(scenario);
        let present = s.join("input.json").exists();
        let declared_skip = s.join("skip.txt").exists();
        let lacking = entry.lacks(needs.get(scenario).map(Vec::as_slice).unwrap_or_default());
        if present || (lacking.is_none() && !declared_skip) {
            applying += 1;
        }
        if !present && lacking.is_none() && !declared_skip {
            problems.push(format!(
                "fixtures/{provider}/{scenario}: missing (llm-{provider} declares what it needs)"
            ));
        }
    }
    if applying == 0 && !shared.is_empty() {
        problems.push(format!(
            "llm-{provider}: every shared scenario is skipped (declare capabilities in INFO and add fixtures, see docs/adding-a-provider.md)"
        ));
    }
    Ok(problems)
}

/// What is wrong with the layout of provider crate `name` in `dir`: a file of
/// [`PROVIDER_SRC_FILES`] missing, or a `*_tests.rs` file directly under `src/`.
pub fn layout_problems(name: &str, dir: &Path) -> Result<Vec<String>> {
    let src = dir.join("src");
    let mut problems = Vec::new();
    for file in PROVIDER_SRC_FILES {
        if !src.join(file).is_file() {
            problems.push(format!(
                "{name}: missing src/{file} (every provider crate has {}; see docs/adding-a-provider.md)",
                PROVIDER_SRC_FILES.join(", ")
            ));
        }
    }
    if src.is_dir() {
        let entries = std::fs::read_dir(&src).map_err(|e| Error::io(&src, e))?;
        let mut extra = Vec::new();
        for entry in entries {
            let file = entry.map_err(|e| Error::io(&src, e))?.file_name();
            let file = file.to_string_lossy();
            if let Some(module) = file.strip_suffix("_tests.rs") {
                extra.push(format!(
                    "{name}: src/{file} not allowed (move it to src/{module}/tests.rs with `mod tests;` in src/{module}.rs)"
                ));
            }
        }
        extra.sort();
        problems.extend(extra);
    }
    Ok(problems)
}

/// Values that are obviously not real keys.
fn is_test_value(token: &str) -> bool {
    let t = token.to_ascii_lowercase();
    ["test", "fake", "dummy", "example", "redacted", "placeholder", "xxxx"]
        .iter()
        .any(|w| t.contains(w))
}

fn is_key_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

/// Key-shaped strings in `text`, as `(byte offset, first characters)`.
pub fn find_secrets(text: &str) -> Vec<(usize, String)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let token_after = |start: usize, allowed: &dyn Fn(u8) -> bool| -> usize {
        bytes.get(start..).unwrap_or_default().iter().take_while(|b| allowed(**b)).count()
    };
    let boundary_before = |i: usize| i == 0 || bytes.get(i - 1).is_none_or(|b| !is_key_char(*b));
    let mut push = |at: usize, len: usize| {
        let token = text.get(at..at + len).unwrap_or_default();
        if !is_test_value(token) {
            found.push((at, text.get(at..at + len.min(8)).unwrap_or_default().to_owned()));
        }
    };
    let mut i = 0;
    while i < bytes.len() {
        let rest = bytes.get(i..).unwrap_or_default();
        if rest.starts_with(b"sk-") && boundary_before(i) {
            let len = 3 + token_after(i + 3, &is_key_char);
            let anthropic = rest.starts_with(b"sk-ant-") && len > "sk-ant-".len() + 8;
            if anthropic || len - 3 >= 20 {
                push(i, len);
                i += len;
                continue;
            }
        } else if rest.starts_with(b"AIza") && boundary_before(i) {
            let len = 4 + token_after(i + 4, &is_key_char);
            if len - 4 >= 30 {
                push(i, len);
                i += len;
                continue;
            }
        } else if rest.starts_with(b"Bearer ") {
            let bearer_char =
                |c: u8| is_key_char(c) || matches!(c, b'.' | b'~' | b'+' | b'/' | b'=');
            let len = token_after(i + 7, &bearer_char);
            if len > 20 {
                push(i + 7, len);
                i += 7 + len;
                continue;
            }
        }
        i += 1;
    }
    found.extend(find_aws_secrets(text));
    found.sort_unstable();
    found
}

/// Names an AWS secret access key follows (compared case-insensitively, `_`, `-` and
/// spaces removed): `aws_secret_access_key`, `SecretAccessKey`, `secretAccessKey`, ...
const AWS_SECRET_NAMES: [&str; 1] = ["secretaccesskey"];
/// Names an AWS session token follows: `aws_session_token`, `SessionToken`, `Token` in an
/// instance-metadata answer, the `x-amz-security-token` header.
const AWS_TOKEN_NAMES: [&str; 3] = ["sessiontoken", "securitytoken", "\"token"];
/// How every AWS session token starts (base64 of its binary header), whatever its name.
const AWS_TOKEN_PREFIXES: [&str; 2] = ["IQoJb3JpZ2lu", "FwoGZXIvYXdz"];
/// Real session tokens are hundreds of characters; shorter values are not reported.
const AWS_TOKEN_MIN: usize = 100;

/// AWS credential shapes in `text`, as `(byte offset, first characters)`: access key ids
/// (`AKIA`/`ASIA` and 16 upper-case letters or digits), secret access keys (40 base64
/// characters after a secret-access-key name) and session tokens (after a session-token
/// name, or starting like one).
pub fn find_aws_secrets(text: &str) -> Vec<(usize, String)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let is_base64 = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'/' | b'+' | b'=');
    let run = |start: usize, allowed: &dyn Fn(u8) -> bool| {
        bytes.get(start..).unwrap_or_default().iter().take_while(|b| allowed(**b)).count()
    };
    let mut push = |at: usize, len: usize| {
        let token = text.get(at..at + len).unwrap_or_default();
        if !is_test_value(token) {
            found.push((at, text.get(at..at + len.min(8)).unwrap_or_default().to_owned()));
        }
    };
    // A name, compared without case and separators, then `=`, `:`, quotes or spaces, then
    // the value: its offset and length.
    let value_after = |name_end: usize| {
        let gap = run(name_end, &|c| matches!(c, b'"' | b'\'' | b':' | b'=' | b' ' | b'\t'));
        let start = name_end + gap;
        (gap > 0).then(|| (start, run(start, &is_base64)))
    };
    let folded: Vec<(usize, u8)> = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| !matches!(b, b'_' | b'-' | b' '))
        .map(|(i, b)| (i, b.to_ascii_lowercase()))
        .collect();
    let ends_of = |name: &str| -> Vec<usize> {
        let name = name.as_bytes();
        folded
            .windows(name.len())
            .filter(|w| w.iter().map(|(_, b)| *b).eq(name.iter().copied()))
            .filter_map(|w| w.last().map(|(i, _)| i + 1))
            .collect()
    };
    for end in AWS_SECRET_NAMES.iter().flat_map(|n| ends_of(n)) {
        if let Some((start, 40)) = value_after(end) {
            push(start, 40);
        }
    }
    for end in AWS_TOKEN_NAMES.iter().flat_map(|n| ends_of(n)) {
        if let Some((start, len)) = value_after(end)
            && len >= AWS_TOKEN_MIN
        {
            push(start, len);
        }
    }
    let boundary_before = |i: usize| i == 0 || bytes.get(i - 1).is_none_or(|b| !is_base64(*b));
    for (i, _) in text.char_indices() {
        let rest = bytes.get(i..).unwrap_or_default();
        let key_id = rest.starts_with(b"AKIA") || rest.starts_with(b"ASIA");
        if key_id && boundary_before(i) {
            let len = 4 + run(i + 4, &|c| c.is_ascii_uppercase() || c.is_ascii_digit());
            let next = bytes.get(i + len).copied();
            if len == 20 && next.is_none_or(|c| !c.is_ascii_alphanumeric()) {
                push(i, len);
            }
        }
        let token = AWS_TOKEN_PREFIXES.iter().any(|p| rest.starts_with(p.as_bytes()));
        if token && boundary_before(i) {
            let len = run(i, &is_base64);
            if len >= AWS_TOKEN_MIN {
                push(i, len);
            }
        }
    }
    found.sort_unstable();
    found.dedup_by_key(|(at, _)| *at);
    found
}

/// Every key-shaped string in the files under `dir`.
pub fn scan_secrets(dir: &Path) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    if !dir.is_dir() {
        return Ok(problems);
    }
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|e| Error::io(&d, e))?;
        for entry in entries {
            let path = entry.map_err(|e| Error::io(&d, e))?.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
            let text = String::from_utf8_lossy(&bytes);
            for (offset, start) in find_secrets(&text) {
                let line = text.get(..offset).unwrap_or_default().matches('\n').count() + 1;
                problems.push(format!(
                    "{}:{line}: key-shaped secret `{start}...`: scrub it (use `test-key`)",
                    path.display()
                ));
            }
        }
    }
    problems.sort();
    Ok(problems)
}

/// What must follow a [`REFERENCES`] pattern for it to count.
#[derive(Debug, Clone, Copy)]
enum Then {
    /// Anything: the pattern is specific enough.
    Anything,
    /// A number, optionally after `#` (a tracker number, a numbered decision).
    Number,
    /// The end of the word (so that `the leading` does not count).
    WordEnd,
}

/// Pointers out of the repository, lower case; a match also needs a word boundary before
/// it. Each is split in two so that this file passes its own rule.
const REFERENCES: &[(&str, Then)] = &[
    (concat!("decision", " "), Then::Number),
    (concat!("decisions", " "), Then::Number),
    (concat!("issue", " "), Then::Number),
    (concat!("issues", " "), Then::Number),
    (concat!("session", " "), Then::Number),
    (concat!("follow-up", " "), Then::Number),
    (concat!("follow-ups", " "), Then::Number),
    (concat!("the", " lead"), Then::WordEnd),
    (concat!("openclaw", "-behavior"), Then::Anything),
    (concat!("wire", "-formats"), Then::Anything),
    (concat!("bedrock", "-azure"), Then::Anything),
    (concat!("peer", "-lessons"), Then::Anything),
    (concat!("style", ".md"), Then::Anything),
    (concat!("shared", "/spec"), Then::Anything),
    (concat!("/wo", "rk/"), Then::Anything),
];

/// Where `REFERENCES` are looked for, relative to the workspace root (folders and files;
/// the recorded fixtures are data, only their notes are prose).
pub const REFERENCE_DIRS: &[&str] = &[
    "crates",
    "docs",
    "xtask/src",
    "xtask/scaffold",
    "examples",
    "fuzz",
    ".ci",
    "README.md",
    "fixtures/README.md",
    "fixtures/SCENARIOS.md",
];

/// The `REFERENCES` in `text`, as `(line number, matched text)`.
pub fn find_references(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let lower = line.to_ascii_lowercase();
        let bytes = lower.as_bytes();
        for (pattern, then) in REFERENCES {
            for (at, _) in lower.match_indices(pattern) {
                let before = at.checked_sub(1).and_then(|i| bytes.get(i)).copied();
                if pattern.starts_with(|c: char| c.is_ascii_alphanumeric())
                    && before.is_some_and(|b| b.is_ascii_alphanumeric())
                {
                    continue;
                }
                let end = at + pattern.len();
                let rest = bytes.get(end..).unwrap_or_default();
                let len = match then {
                    Then::Anything => 0,
                    Then::Number => {
                        let hash = usize::from(rest.first() == Some(&b'#'));
                        let digits = rest
                            .get(hash..)
                            .unwrap_or_default()
                            .iter()
                            .take_while(|b| b.is_ascii_digit())
                            .count();
                        if digits == 0 {
                            continue;
                        }
                        hash + digits
                    }
                    Then::WordEnd => {
                        if rest.first().is_some_and(|b| b.is_ascii_alphanumeric()) {
                            continue;
                        }
                        0
                    }
                };
                found.push((index + 1, line.get(at..end + len).unwrap_or_default().to_owned()));
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// Every `REFERENCES` match in the text files under `dirs` (folders or files, relative to
/// `root`), skipping `target/` and hidden entries inside them.
pub fn scan_references_in(root: &Path, dirs: &[&str]) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    let mut files = Vec::new();
    let mut stack: Vec<PathBuf> = Vec::new();
    for path in dirs.iter().map(|d| root.join(d)) {
        if path.is_dir() {
            stack.push(path);
        } else if path.is_file() {
            files.push(path);
        }
    }
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|e| Error::io(&d, e))?;
        for entry in entries {
            let path = entry.map_err(|e| Error::io(&d, e))?.path();
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if name.starts_with('.') || name == "target" {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push(path);
            }
        }
    }
    for path in files {
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        // Binary fixtures are not prose.
        let Ok(text) = std::str::from_utf8(&bytes) else { continue };
        for (line, matched) in find_references(text) {
            problems.push(format!(
                "{}:{line}: `{matched}` points outside the repository: state the reason itself",
                relative(root, &path)
            ));
        }
    }
    problems.sort();
    Ok(problems)
}

/// Every `REFERENCES` match under [`REFERENCE_DIRS`] of the workspace at `root`.
pub fn scan_references(root: &Path) -> Result<Vec<String>> {
    scan_references_in(root, REFERENCE_DIRS)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
mod tests {
    use super::*;

    /// A package of a made-up workspace: `(name, [(dependency, kind)])`.
    type Pkg<'a> = (&'a str, &'a [(&'a str, Option<&'a str>)]);

    /// Metadata for a made-up workspace under `/ws`.
    fn metadata(packages: &[Pkg<'_>]) -> Metadata {
        let manifest = |name: &str| {
            if name.starts_with("example-") {
                format!("/ws/examples/{name}/Cargo.toml")
            } else {
                format!("/ws/crates/{name}/Cargo.toml")
            }
        };
        let packages_json: Vec<serde_json::Value> = packages
            .iter()
            .map(|(name, deps)| {
                serde_json::json!({
                    "name": name, "id": name, "manifest_path": manifest(name), "rust_version": "1.95",
                    "targets": [],
                    "dependencies": deps.iter().map(|(d, k)| dependency(d, *k)).collect::<Vec<_>>(),
                })
            })
            .collect();
        let nodes: Vec<serde_json::Value> = packages
            .iter()
            .map(|(name, deps)| {
                serde_json::json!({
                    "id": name,
                    "deps": deps.iter().map(|(d, k)| serde_json::json!({"pkg": d.split('[').next(), "dep_kinds": [{"kind": k}]})).collect::<Vec<_>>(),
                })
            })
            .collect();
        // Third-party crates are packages, not members.
        let third_party = ["serde", "tokio", "reqwest", "hyper"];
        let ids: Vec<&str> =
            packages.iter().map(|(n, _)| *n).filter(|n| !third_party.contains(n)).collect();
        serde_json::from_value(serde_json::json!({
            "packages": packages_json, "workspace_members": ids, "resolve": {"nodes": nodes},
        }))
        .unwrap()
    }

    /// `name[f,g]`: a dependency without its default features, turning on `f` and `g`.
    fn dependency(spec: &str, kind: Option<&str>) -> serde_json::Value {
        match spec.split_once('[') {
            Some((name, features)) => {
                let features: Vec<&str> =
                    features.trim_end_matches(']').split(',').filter(|f| !f.is_empty()).collect();
                serde_json::json!({"name": name, "kind": kind, "features": features, "uses_default_features": false})
            }
            None => serde_json::json!({"name": spec, "kind": kind}),
        }
    }

    fn dependency_problems(packages: &[Pkg<'_>]) -> Vec<String> {
        let mut problems = Vec::new();
        check_dependencies(Path::new("/ws"), &metadata(packages), &mut problems);
        problems
    }

    #[test]
    fn allowed_dependency_graph_is_clean() {
        let problems = dependency_problems(&[
            ("llm-core", &[("serde", None), ("tokio", None)]),
            ("llm-a", &[("llm-core", None), ("reqwest", None)]),
            ("tool-planner", &[("llm-core", None), ("llm-a", Some("dev"))]),
            ("agent-core", &[("llm-core", None), ("tool-planner", None), ("llm-a", Some("dev"))]),
            ("clawcall", &[("llm-core", None), ("agent-core", None), ("llm-a", None)]),
            ("example-a", &[("clawcall[a]", None)]),
            ("serde", &[]),
            ("tokio", &[]),
            ("reqwest", &[("hyper", None)]),
            ("hyper", &[]),
        ]);
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn forbidden_edges_are_reported() {
        let problems = dependency_problems(&[
            ("llm-core", &[("reqwest", None), ("llm-a", Some("dev"))]),
            ("llm-a", &[("llm-core", None), ("llm-b", None), ("agent-core", Some("dev"))]),
            ("llm-b", &[("llm-core", None)]),
            ("agent-core", &[("llm-core", None), ("llm-b", None)]),
            ("example-two", &[("clawcall[a]", None), ("llm-b", None)]),
            ("example-all", &[("clawcall", None)]),
            ("example-old", &[("llm-core", None), ("agent-core", None), ("llm-a", None)]),
            ("clawcall", &[("llm-core", None), ("agent-core", None), ("llm-b", None)]),
            ("llm-c", &[("llm-core", None)]),
            ("agent-mcp", &[("agent-core", None), ("xtask", Some("dev"))]),
            ("llm-testkit", &[("llm-core", None), ("llm-a", Some("dev"))]),
            ("new-crate", &[("llm-core", None)]),
            ("reqwest", &[]),
            ("xtask", &[]),
        ]);
        let want = [
            "llm-core must not depend on reqwest (normal dependency",
            "llm-core must not depend on llm-a (dev dependency",
            "llm-a must not depend on llm-b (normal dependency",
            "llm-a must not depend on agent-core (dev dependency",
            "agent-core must not depend on llm-b (normal dependency",
            "agent-mcp must not depend on xtask (dev dependency",
            "llm-testkit must not depend on llm-a (dev dependency",
            "new-crate has no dependency rule",
            "example example-two must depend on exactly one provider crate (it pulls in llm-a, llm-b)",
            "example example-old must depend on clawcall",
            "example example-all must take clawcall with `default-features = false`",
            "example example-all must depend on exactly one provider crate (it pulls in none)",
            "llm-c has no example: add examples/c/",
        ];
        for w in want {
            assert!(problems.iter().any(|p| p.starts_with(w)), "{w}\nnot in {problems:#?}");
        }
        assert_eq!(problems.len(), want.len(), "{problems:#?}");
    }

    /// A directory under the system temp dir, removed on drop.
    struct TempDir(std::path::PathBuf);

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn crate_with(files: &[&str]) -> TempDir {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            TempDir(std::env::temp_dir().join(format!("tidy-layout-{}-{n}", std::process::id())));
        for file in files {
            let path = dir.0.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "//! x\n").unwrap();
        }
        dir
    }

    #[test]
    fn provider_layout_accepts_module_test_folders() {
        let dir = crate_with(&[
            "src/lib.rs",
            "src/convert.rs",
            "src/convert/tests.rs",
            "src/stream.rs",
            "src/stream/tests.rs",
            "src/stream/tool_calls.rs",
            "src/error.rs",
            "src/compat.rs",
            "tests/it.rs",
        ]);
        assert_eq!(layout_problems("llm-a", &dir.0).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn provider_layout_names_crate_and_missing_or_extra_file() {
        let dir =
            crate_with(&["src/lib.rs", "src/convert.rs", "src/convert_tests.rs", "src/stream.rs"]);
        let problems = layout_problems("llm-a", &dir.0).unwrap();
        assert_eq!(problems.len(), 2, "{problems:#?}");
        assert!(problems[0].starts_with("llm-a: missing src/error.rs"), "{problems:#?}");
        assert!(
            problems[1].starts_with(
                "llm-a: src/convert_tests.rs not allowed (move it to src/convert/tests.rs"
            ),
            "{problems:#?}"
        );
        let empty = crate_with(&[]);
        let problems = layout_problems("llm-b", &empty.0).unwrap();
        let missing: Vec<&str> =
            problems.iter().filter_map(|p| p.strip_prefix("llm-b: missing src/")).collect();
        assert_eq!(missing.len(), PROVIDER_SRC_FILES.len(), "{problems:#?}");
    }

    #[test]
    fn the_scaffold_has_the_layout() {
        let paths: Vec<String> = crate::new_provider::template_paths()
            .filter_map(|p| p.strip_prefix("crates/llm-{{name}}/"))
            .map(str::to_owned)
            .collect();
        for file in PROVIDER_SRC_FILES {
            assert!(paths.contains(&format!("src/{file}")), "src/{file} not scaffolded");
        }
        assert!(!paths.iter().any(|p| p.ends_with("_tests.rs")), "{paths:?}");
    }

    #[test]
    fn workspace_provider_crates_have_the_layout() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let mut seen = 0;
        for (name, dir) in subdirs(&root.join("crates")).unwrap() {
            if is_provider_crate(&name) {
                seen += 1;
                assert_eq!(layout_problems(&name, &dir).unwrap(), Vec::<String>::new());
            }
        }
        assert!(seen >= 5, "only {seen} provider crates under crates/");
    }

    #[test]
    fn finds_key_shapes() {
        let openai = format!("sk-{}", "A1b2C3d4".repeat(4));
        let anthropic = format!("sk-ant-api03-{}", "Zz9_".repeat(6));
        let google = format!("AIza{}", "Sy0-".repeat(9));
        let bearer = format!("Bearer {}", "abc.DEF_123".repeat(3));
        for secret in [&openai, &anthropic, &google, &bearer] {
            let text = format!("{{\"k\": \"{secret}\"}}");
            assert_eq!(find_secrets(&text).len(), 1, "{secret}");
        }
    }

    /// AWS credential shapes, each built here from its documented form (AWS's documentation
    /// keys, with `EXAMPLE` replaced so they no longer look like test values).
    #[test]
    fn finds_aws_key_shapes() {
        let key_id = "AKIAIOSFODNN7ABCDEFG";
        let temporary_id = "ASIAIOSFODNN7ABCDEFG";
        let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYABCDEFGKEY";
        assert_eq!(secret.len(), 40);
        let token = format!("IQoJb3JpZ2luX2VjEJr{}", "a1B2c3D4/+".repeat(12));
        let named_token = "Zm9vYmFy".repeat(15);
        let cases = [
            format!("aws_access_key_id = {key_id}"),
            format!("{{\"AccessKeyId\": \"{temporary_id}\"}}"),
            format!("aws_secret_access_key = {secret}"),
            format!("AWS_SECRET_ACCESS_KEY={secret}"),
            format!("{{\"SecretAccessKey\":\"{secret}\"}}"),
            format!("{{\"secretAccessKey\": \"{secret}\"}}"),
            format!("aws_session_token = {named_token}"),
            format!("x-amz-security-token: {named_token}"),
            format!("{{\"Token\": \"{named_token}\"}}"),
            format!("anything {token}"),
        ];
        for text in &cases {
            assert_eq!(find_secrets(text).len(), 1, "{text}: {:?}", find_secrets(text));
        }
        // A file with a whole profile reports each part once.
        let profile = format!(
            "[default]\naws_access_key_id = {key_id}\naws_secret_access_key = {secret}\n\
             aws_session_token = {token}\n"
        );
        assert_eq!(find_secrets(&profile).len(), 3, "{:?}", find_secrets(&profile));
    }

    #[test]
    fn ignores_aws_test_values_and_look_alikes() {
        let forty = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYABCDEFGKEY";
        for text in [
            "AKIAIOSFODNN7EXAMPLE".to_owned(),
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".to_owned(),
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".to_owned(),
            // Too short or too long to be an id; lower case is no id.
            "AKIAIOSFODNN7ABCDEF".to_owned(),
            "AKIAIOSFODNN7ABCDEFGH".to_owned(),
            "akiaiosfodnn7abcdefg".to_owned(),
            // Part of a longer word.
            "XAKIAIOSFODNN7ABCDEFG".to_owned(),
            // Forty characters without a secret-key name, and a short value after one.
            format!("sha = {forty}"),
            "aws_secret_access_key = short".to_owned(),
            // A short session token, and a test one.
            "aws_session_token = abc".to_owned(),
            format!("aws_session_token = test-{}", "Zm9v".repeat(30)),
        ] {
            assert!(find_secrets(&text).is_empty(), "{text}: {:?}", find_secrets(&text));
        }
    }

    #[test]
    fn ignores_test_values_and_words() {
        for text in [
            "test-key",
            "sk-test-0123456789abcdefghijklmnop",
            "Bearer test-key",
            "Bearer test-key-0123456789abcdefghijkl",
            "task-0123456789abcdefghijklmnopqrstuv",
            "sk-short",
            "AIzaShort",
        ] {
            assert!(find_secrets(text).is_empty(), "{text}");
        }
    }

    #[test]
    fn finds_references_outside_the_repository() {
        // Each case is `(before, word, after)`, the match being `word` and the start of
        // `after`; written in pieces so that this file passes the rule it tests.
        let cases = [
            ("// (spec ", "decision", " 7): retried", " 7"),
            ("//! ", concat!("openclaw", "-behavior"), ".md §2.2", ""),
            ("see `", concat!("wire", "-formats"), "` §5.e", ""),
            ("Spec `", concat!("bedrock", "-azure"), "` A.7", ""),
            ("", concat!("peer", "-lessons"), ".md item 2", ""),
            ("section 4 of ", concat!("style", ".md"), "", ""),
            ("in the ", concat!("shared", "/spec"), "/README.md", ""),
            ("the SDK (", "issue", " #18 names it)", " #18"),
            ("", "Issue", " 23: a path", " 23"),
            ("decoder work (", "issues", " 21 and 23)", " 21"),
            ("(", "session", " 4)", " 4"),
            ("### ", "Follow-up", " 2: the peak", " 2"),
            ("Reported to ", concat!("the", " lead"), ".", ""),
            ("cd ", "/wo", "rk/wt/refs", "rk/"),
        ];
        for (before, word, after, tail) in cases {
            let text = format!("{before}{word}{after}");
            let found = find_references(&text);
            assert_eq!(found.len(), 1, "{text}: {found:?}");
            assert!(found.iter().any(|(_, m)| *m == format!("{word}{tail}")), "{text}: {found:?}");
        }
        let two = format!("a\nb {} 1 and {} 3", "decision", "session");
        assert_eq!(
            find_references(&two).iter().map(|(line, _)| *line).collect::<Vec<_>>(),
            [2, 2],
            "{two}"
        );
    }

    #[test]
    fn ignores_words_that_only_look_like_references() {
        for text in [
            "the leading byte",
            "an approval decision",
            "a follow-up message",
            "steering and follow-up queues",
            "the session token",
            "this issue is known",
            "predecision 7",
            concat!("noni", "ssue 3"),
            "/workspace/ and /network/",
            concat!("lifest", "yle.md"),
        ] {
            assert_eq!(find_references(text), Vec::<(usize, String)>::new(), "{text}");
        }
    }

    #[test]
    fn scan_reports_a_planted_reference_with_its_path_and_line() {
        let dir = crate_with(&["src/lib.rs", "docs/notes.md", "docs/target/junk.md", "docs/.x.md"]);
        let planted = format!("//! x\n/// Retried (spec {} 7).\n", "decision");
        std::fs::write(dir.0.join("src/lib.rs"), &planted).unwrap();
        std::fs::write(dir.0.join("docs/notes.md"), format!("Reported to the {}.\n", "lead"))
            .unwrap();
        for skipped in ["docs/target/junk.md", "docs/.x.md"] {
            std::fs::write(dir.0.join(skipped), format!("/{}/x", "work")).unwrap();
        }
        let mut blob = vec![0xff, 0xfe];
        blob.extend(format!("/{}/", "work").bytes());
        std::fs::write(dir.0.join("src/blob.bin"), blob).unwrap();
        let problems = scan_references_in(&dir.0, &["src", "docs"]).unwrap();
        assert_eq!(problems.len(), 2, "{problems:#?}");
        let file = scan_references_in(&dir.0, &["docs/notes.md", "missing.md"]).unwrap();
        assert_eq!(file.len(), 1, "{file:#?}");
        let lead = format!("docs/notes.md:1: `the {}`", "lead");
        assert!(problems[0].starts_with(&lead), "{problems:#?}");
        let decision = format!("src/lib.rs:2: `{} 7`", "decision");
        assert!(problems[1].starts_with(&decision), "{problems:#?}");
    }

    #[test]
    fn workspace_has_no_reference_outside_the_repository() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        assert_eq!(scan_references(root).unwrap(), Vec::<String>::new());
    }

    /// A new crate that does not say `publish = false` and lacks the metadata, the README
    /// or the README doctest is reported; with all of them, or `publish = false`, it is not.
    #[test]
    fn a_publishable_crate_needs_its_metadata_and_readme() {
        let dir = std::env::temp_dir().join(format!("tidy-publish-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("src")).unwrap();
        let lib = dir.join("src/lib.rs");
        std::fs::write(&lib, "//! A crate.\n").unwrap();
        let package = |extra: serde_json::Value| {
            let mut p = serde_json::json!({
                "name": "clawcall-new", "id": "clawcall-new 0.1.0",
                "manifest_path": dir.join("Cargo.toml"), "rust_version": "1.95",
                "dependencies": [], "publish": null,
                "targets": [{ "kind": ["lib"], "src_path": lib }],
            });
            for (k, v) in extra.as_object().unwrap() {
                p[k] = v.clone();
            }
            let metadata = serde_json::json!({
                "packages": [p], "workspace_members": ["clawcall-new 0.1.0"], "resolve": null,
            });
            let metadata: Metadata = serde_json::from_value(metadata).unwrap();
            let mut problems = Vec::new();
            check_publishing(&dir, &metadata, &mut problems).unwrap();
            problems
        };
        let bare = package(serde_json::json!({}));
        assert_eq!(bare.len(), 1, "{bare:?}");
        for field in [
            "description",
            "license",
            "repository",
            "keywords",
            "categories",
            "docs.rs",
            "readme",
            "doctest",
        ] {
            assert!(bare[0].contains(field), "{field}: {bare:?}");
        }
        assert!(package(serde_json::json!({ "publish": [] })).is_empty());
        std::fs::write(dir.join("README.md"), "# clawcall-new\n").unwrap();
        std::fs::write(&lib, "//! A crate.\n#[doc = include_str!(\"../README.md\")]\n").unwrap();
        let complete = package(serde_json::json!({
            "description": "d", "license": "MIT", "repository": "https://example.com/r",
            "readme": dir.join("README.md"), "keywords": ["k"], "categories": ["c"],
            "metadata": { "docs": { "rs": { "all-features": true, "rustdoc-args": ["--cfg", "docsrs"] } } },
        }));
        assert!(complete.is_empty(), "{complete:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
