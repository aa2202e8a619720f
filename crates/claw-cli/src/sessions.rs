//! Saved transcripts: `--save FILE`, and the sessions kept in the user's data
//! directory for `--continue` and `claw sessions`.

use std::io::Write;
use std::path::{Path, PathBuf};

use llm_core::Message;

use crate::{config, exit, sanitize};

/// A saved transcript (the format of `--save`, `--resume` and the sessions).
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Transcript {
    /// The provider name (`anthropic`, `openai`, ...).
    pub(crate) provider: String,
    /// The model id.
    pub(crate) model: String,
    /// The base URL, when it was not the provider's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) base_url: Option<String>,
    /// The system prompt.
    #[serde(default)]
    pub(crate) system_prompt: Option<String>,
    /// The whole conversation.
    pub(crate) messages: Vec<Message>,
}

/// Reads a transcript.
pub(crate) fn load(path: &Path) -> Result<Transcript, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a claw transcript: {e}", path.display()))
}

/// A file written whole or not at all: a temporary file is created beside the
/// target when the run starts (so a bad path fails before any request) and
/// renamed over the target at the end.
pub(crate) struct AtomicFile {
    path: PathBuf,
    temp: tempfile::NamedTempFile,
}

impl AtomicFile {
    /// Checks that `path` can be written by creating the temporary file beside it.
    pub(crate) fn prepare(path: &Path) -> Result<AtomicFile, String> {
        if path.is_dir() {
            return Err(format!("cannot save to {}: it is a directory", path.display()));
        }
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let temp = tempfile::Builder::new()
            .prefix(".claw-save-")
            .tempfile_in(&parent)
            .map_err(|e| format!("cannot save to {}: {e}", path.display()))?;
        Ok(AtomicFile { path: path.to_path_buf(), temp })
    }

    /// The target path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `transcript` and renames it over the target.
    pub(crate) fn commit(mut self, transcript: &Transcript) -> Result<(), String> {
        let text = serde_json::to_vec_pretty(transcript).map_err(|e| e.to_string())?;
        self.temp.write_all(&text).map_err(|e| e.to_string())?;
        self.temp.as_file().sync_all().map_err(|e| e.to_string())?;
        self.temp.persist(&self.path).map_err(|e| e.error.to_string())?;
        Ok(())
    }
}

fn dir() -> Result<PathBuf, String> {
    config::sessions_dir().ok_or_else(|| "no home directory for the sessions".to_owned())
}

/// A fresh session file path (named by the start time, so names sort by age).
pub(crate) fn new_path() -> Result<PathBuf, String> {
    let dir = dir()?;
    // Transcripts hold whatever the tools read: the folder is the user's alone.
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    Ok(dir.join(format!("{now}-{}.json", std::process::id())))
}

/// The saved session files, newest first.
fn list() -> Result<Vec<PathBuf>, String> {
    let dir = dir()?;
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot list {}: {e}", dir.display())),
    };
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            (std::fs::metadata(&p).and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH), p)
        })
        .collect();
    files.sort_by(|a, b| b.cmp(a));
    Ok(files.into_iter().map(|(_, p)| p).collect())
}

/// A transcript named by a file path, or by a session id from `claw sessions`.
pub(crate) fn find(name: &Path) -> Result<(PathBuf, Transcript), String> {
    if !name.exists() && name.components().count() == 1 {
        let in_sessions = dir()?.join(name).with_extension("json");
        if in_sessions.is_file() {
            let transcript = load(&in_sessions)?;
            return Ok((in_sessions, transcript));
        }
    }
    Ok((name.to_path_buf(), load(name)?))
}

/// The most recent session, if any.
pub(crate) fn latest() -> Result<Option<(PathBuf, Transcript)>, String> {
    let Some(path) = list()?.into_iter().next() else { return Ok(None) };
    let transcript = load(&path)?;
    Ok(Some((path, transcript)))
}

/// `claw sessions`: one line per session, newest first.
pub(crate) fn print_list() -> u8 {
    let files = match list() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("claw: {e}");
            return exit::CONFIG_ERROR;
        }
    };
    if files.is_empty() {
        println!(
            "no saved sessions yet (they are kept in {})",
            dir().unwrap_or_default().display()
        );
        return exit::OK;
    }
    for path in files {
        let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        match load(&path) {
            Ok(t) => {
                let first = t.messages.iter().find_map(|m| match m {
                    Message::User(u) => Some(
                        u.content
                            .blocks()
                            .iter()
                            .find_map(|b| match b {
                                llm_core::UserContent::Text(t) => Some(t.text.clone()),
                                llm_core::UserContent::Image(_) => None,
                            })
                            .unwrap_or_default(),
                    ),
                    _ => None,
                });
                let first: String =
                    sanitize::one_line(&first.unwrap_or_default()).chars().take(60).collect();
                println!(
                    "{name}  {}  {}  {} messages  {first}",
                    sanitize::terminal(&t.provider),
                    sanitize::terminal(&t.model),
                    t.messages.len()
                );
            }
            Err(e) => println!("{name}  (unreadable: {})", sanitize::terminal(&e)),
        }
    }
    exit::OK
}
