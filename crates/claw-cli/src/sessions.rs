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
    serde_json::from_str(&text).map_err(|e| {
        // serde's own wording names internal types; say what is wrong with the file instead.
        let why = match e.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                format!("it is not valid JSON (line {}, column {})", e.line(), e.column())
            }
            _ => "it does not have a transcript's fields (provider, model, messages)".to_owned(),
        };
        format!("{} is not a claw transcript: {why}", path.display())
    })
}

/// A file written whole or not at all: each write goes to a temporary file
/// beside the target, renamed over it. Nothing is left behind between writes.
pub(crate) struct AtomicFile {
    path: PathBuf,
}

impl AtomicFile {
    /// Checks, before any request, that `path` can be written (by creating
    /// and removing a temporary file beside it) and that it is not a file
    /// other than a transcript, which a save would silently replace.
    pub(crate) fn prepare(path: &Path) -> Result<AtomicFile, String> {
        if path.is_dir() {
            return Err(format!("cannot save to {}: it is a directory", path.display()));
        }
        if std::fs::metadata(path).is_ok_and(|m| m.len() > 0) && load(path).is_err() {
            return Err(format!(
                "{} exists and is not a claw transcript; not replacing it (remove it or choose another file)",
                path.display()
            ));
        }
        drop(Self::temp(path)?);
        Ok(AtomicFile { path: path.to_path_buf() })
    }

    fn temp(path: &Path) -> Result<tempfile::NamedTempFile, String> {
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        tempfile::Builder::new()
            .prefix(".claw-save-")
            .tempfile_in(&parent)
            .map_err(|e| format!("cannot save to {}: {e}", path.display()))
    }

    /// The target path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `transcript` to a temporary file and renames it over the target.
    pub(crate) fn commit(&self, transcript: &Transcript) -> Result<(), String> {
        let text = serde_json::to_vec_pretty(transcript).map_err(|e| e.to_string())?;
        write_atomically(&self.path, &text)
    }
}

/// Writes `bytes` to a temporary file beside `path` and renames it over `path`.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let mut temp = AtomicFile::temp(path)?;
    temp.write_all(bytes).map_err(|e| e.to_string())?;
    temp.as_file().sync_all().map_err(|e| e.to_string())?;
    temp.persist(path).map_err(|e| e.error.to_string())?;
    Ok(())
}

/// Holds a session for one `claw` process: a second `claw -c` on the same
/// session sees it taken and continues in a copy instead of overwriting
/// the first one's exchanges. Released when dropped (or the process ends).
pub(crate) struct SessionLock {
    _file: std::fs::File,
}

/// Takes the lock of the session at `path`; `Ok(None)` when another process holds it.
pub(crate) fn lock(path: &Path) -> Result<Option<SessionLock>, String> {
    let lock_path = path.with_extension("lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("cannot lock {}: {e}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(SessionLock { _file: file })),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(format!("cannot lock {}: {e}", path.display())),
    }
}

fn dir() -> Result<PathBuf, String> {
    let dir =
        config::sessions_dir().ok_or_else(|| "no home directory for the sessions".to_owned())?;
    private(&dir)?;
    Ok(dir)
}

/// Refuses or tightens a sessions directory others can write to: anyone who
/// can plant a file there chooses where `--continue` sends the key.
fn private(dir: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = match std::fs::metadata(dir) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(format!("cannot check {}: {e}", dir.display())),
        };
        let mode = meta.permissions().mode();
        if mode & 0o077 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(|e| {
                format!(
                    "the sessions directory {} is open to other users (mode {:o}) and cannot be made private: {e}",
                    dir.display(),
                    mode & 0o777
                )
            })?;
            crate::warn(format_args!(
                "the sessions directory {} was open to other users (mode {:o}); made private (700)",
                dir.display(),
                mode & 0o777
            ));
        }
    }
    Ok(())
}

/// Whether `path` is a session file in claw's own (private) sessions directory.
pub(crate) fn is_own(path: &Path) -> bool {
    let (Ok(dir), Ok(file)) = (dir(), std::fs::canonicalize(path)) else { return false };
    std::fs::canonicalize(dir).is_ok_and(|dir| file.parent() == Some(dir.as_path()))
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
    private(&dir)?;
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
            crate::note(&format!("claw: {e}"));
            return exit::CONFIG_ERROR;
        }
    };
    if files.is_empty() {
        return crate::print_out(&format!(
            "no saved sessions yet (they are kept in {})\n",
            dir().unwrap_or_default().display()
        ));
    }
    let mut out = String::new();
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
                out.push_str(&format!(
                    "{name}  {}  {}  {} messages  {first}\n",
                    sanitize::terminal(&t.provider),
                    sanitize::terminal(&t.model),
                    t.messages.len()
                ));
            }
            Err(e) => {
                out.push_str(&format!("{name}  (unreadable: {})\n", sanitize::terminal(&e)));
            }
        }
    }
    crate::print_out(&out)
}
