//! The workspace the file tools are confined to.
//!
//! Every path the model names is opened through a `cap-std` directory handle, so
//! absolute paths, `..` and symlinks that leave the root are refused by the
//! library (with `openat2`/`O_BENEATH`-style resolution), not by string checks.
//! On top of that, only regular files and directories are served, kernel
//! pseudo-filesystems are refused, and reads are bounded before they happen.
//! Writes (the notes file) go through the same handle, never follow a
//! symlink, never open a FIFO or device in a way that blocks, and refuse a
//! file with more than one hard link (a link may lead out of the workspace).

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

/// At most this many bytes of a file reach the model.
pub(crate) const MAX_READ: u64 = 64 * 1024;

/// At most this many entries of a directory are listed.
pub(crate) const MAX_ENTRIES: usize = 1000;

/// The notes file named by `--notes` or the config: a relative path that
/// stays in the workspace (no `..`, not absolute), checked before anything runs.
pub(crate) fn notes_path(path: &Path) -> Result<PathBuf, String> {
    let shown = path.display();
    if path.as_os_str().is_empty() {
        return Err("the notes file name is empty".to_owned());
    }
    for c in path.components() {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => {
                return Err(format!(
                    "the notes file `{shown}` uses `..`; give a path relative to the workspace, inside it"
                ));
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!(
                    "the notes file `{shown}` is absolute; give a path relative to the workspace"
                ));
            }
        }
    }
    Ok(path.to_path_buf())
}

/// Trees that look like files but are views into the kernel or devices.
const PSEUDO_ROOTS: [&str; 3] = ["/proc", "/sys", "/dev"];

/// Why a workspace access was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AccessError {
    /// The path names something outside the root.
    #[error("`{path}` is outside the workspace {root} (paths are relative to it)")]
    Outside { path: String, root: String },
    /// Not a regular file (device, FIFO, socket) or a pseudo-filesystem entry.
    #[error("`{path}` is a {kind}, not a regular file; refused")]
    Special { path: String, kind: &'static str },
    /// A file with several hard links: one of them may be outside the workspace.
    #[error("`{path}` has {links} hard links (one may lead outside the workspace); refused")]
    HardLinked { path: String, links: u64 },
    /// A directory was asked for and something else is there.
    #[error("`{path}` is a {kind}, not a directory")]
    NotADirectory { path: String, kind: &'static str },
    /// A symbolic link where only a regular file is written.
    #[error("`{path}` is a symbolic link; refused (the notes file must be a regular file)")]
    Symlink { path: String },
    /// The OS refused or the path does not exist.
    #[error("cannot access `{path}`: {source}")]
    Io { path: String, source: std::io::Error },
}

/// A directory the file tools may read, and nothing outside it.
#[derive(Debug)]
pub(crate) struct Workspace {
    dir: Dir,
    root: PathBuf,
}

/// A bounded read of one file.
pub(crate) struct FileRead {
    /// The first [`MAX_READ`] bytes and up to the lookahead asked for more.
    pub(crate) bytes: Vec<u8>,
    /// The file's size.
    pub(crate) size: u64,
}

/// Flags for opening the notes file: a FIFO or device must not block the
/// open, and the last path component must not be a symlink (`cap-std` keeps a
/// link within the root, but a link is never the file the user named).
#[cfg(unix)]
const OPEN_FLAGS: i32 = libc::O_NONBLOCK | libc::O_NOFOLLOW;

impl Workspace {
    /// Opens `root` (which must be a directory) as the workspace.
    pub(crate) fn open(root: &Path) -> Result<Workspace, String> {
        let root = std::fs::canonicalize(root)
            .map_err(|e| format!("workspace {}: {e}", root.display()))?;
        if under_pseudo_root(&root) {
            return Err(format!("workspace {} is a kernel pseudo-filesystem", root.display()));
        }
        let dir = Dir::open_ambient_dir(&root, ambient_authority())
            .map_err(|e| format!("workspace {}: {e}", root.display()))?;
        Ok(Workspace { dir, root })
    }

    /// The canonical root.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// `path` relative to the root: an absolute path is accepted only when it
    /// is lexically under the root; everything else is left to `cap-std`.
    fn relative(&self, path: &str) -> Result<PathBuf, AccessError> {
        let p = Path::new(path);
        let rel = if p.is_absolute() {
            p.strip_prefix(&self.root).map(Path::to_path_buf).map_err(|_| self.outside(path))?
        } else {
            p.to_path_buf()
        };
        if rel.as_os_str().is_empty() { Ok(PathBuf::from(".")) } else { Ok(rel) }
    }

    fn outside(&self, path: &str) -> AccessError {
        AccessError::Outside { path: path.to_owned(), root: self.root.display().to_string() }
    }

    fn io(&self, path: &str, source: std::io::Error) -> AccessError {
        // cap-std reports an escape as PermissionDenied with this wording.
        if source.kind() == std::io::ErrorKind::PermissionDenied
            && source.to_string().contains("outside of the filesystem")
        {
            return self.outside(path);
        }
        AccessError::Io { path: path.to_owned(), source }
    }

    /// Refuses entries whose real location is in a kernel pseudo-filesystem
    /// (possible when the root is `/` or contains a bind mount).
    fn check_real_location(&self, path: &str, rel: &Path) -> Result<(), AccessError> {
        let real = self.dir.canonicalize(rel).map_err(|e| self.io(path, e))?;
        if under_pseudo_root(&self.root.join(real)) {
            return Err(AccessError::Special { path: path.to_owned(), kind: "kernel file" });
        }
        Ok(())
    }

    /// Reads at most [`MAX_READ`] bytes of the regular file at `path`, and
    /// `lookahead` bytes more (so a secret cut by the limit can still be found).
    pub(crate) fn read(&self, path: &str, lookahead: u64) -> Result<FileRead, AccessError> {
        let rel = self.relative(path)?;
        let meta = self.dir.metadata(&rel).map_err(|e| self.io(path, e))?;
        if !meta.is_file() {
            return Err(AccessError::Special { path: path.to_owned(), kind: kind_of(&meta) });
        }
        self.check_real_location(path, &rel)?;
        let mut options = cap_std::fs::OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        {
            use cap_std::fs::OpenOptionsExt;
            // Only O_NONBLOCK: a symlink inside the root is followed for reads.
            options.custom_flags(libc::O_NONBLOCK);
        }
        let file = self.dir.open_with(&rel, &options).map_err(|e| self.io(path, e))?;
        // Checked again on the handle: the entry may have been swapped since.
        let meta = file.metadata().map_err(|e| self.io(path, e))?;
        self.check_handle(path, &meta)?;
        let mut bytes = Vec::new();
        file.take(MAX_READ + lookahead).read_to_end(&mut bytes).map_err(|e| self.io(path, e))?;
        let size = meta.len().max(bytes.len() as u64);
        Ok(FileRead { bytes, size })
    }

    /// Appends `line` to the regular file `rel` (created when missing).
    pub(crate) fn append(&self, rel: &Path, line: &str) -> Result<(), AccessError> {
        use std::io::Write;
        let path = rel.display().to_string();
        let mut options = cap_std::fs::OpenOptions::new();
        options.append(true).create(true);
        #[cfg(unix)]
        {
            use cap_std::fs::OpenOptionsExt;
            options.custom_flags(OPEN_FLAGS);
        }
        let mut file = self.dir.open_with(rel, &options).map_err(|e| {
            // O_NOFOLLOW on a symlink: ELOOP.
            #[cfg(unix)]
            if e.raw_os_error() == Some(libc::ELOOP) {
                return AccessError::Symlink { path: path.clone() };
            }
            // O_NONBLOCK on a FIFO without a reader: ENXIO.
            #[cfg(unix)]
            if e.raw_os_error() == Some(libc::ENXIO) {
                return AccessError::Special { path: path.clone(), kind: "FIFO" };
            }
            self.io(&path, e)
        })?;
        let meta = file.metadata().map_err(|e| self.io(&path, e))?;
        self.check_handle(&path, &meta)?;
        // A workspace of `/` must not make a kernel file the notes file.
        self.check_real_location(&path, rel)?;
        file.write_all(line.as_bytes()).map_err(|e| self.io(&path, e))
    }

    /// What the opened handle is: a regular file with one link, or refused.
    fn check_handle(&self, path: &str, meta: &cap_std::fs::Metadata) -> Result<(), AccessError> {
        if !meta.is_file() {
            return Err(AccessError::Special { path: path.to_owned(), kind: kind_of(meta) });
        }
        #[cfg(unix)]
        {
            use cap_std::fs::MetadataExt;
            if meta.nlink() > 1 {
                return Err(AccessError::HardLinked { path: path.to_owned(), links: meta.nlink() });
            }
        }
        Ok(())
    }

    /// The sorted entry names of the directory at `path` (directories end
    /// with `/`), at most [`MAX_ENTRIES`], and the total count.
    pub(crate) fn list(&self, path: &str) -> Result<(Vec<String>, usize), AccessError> {
        let rel = self.relative(path)?;
        let meta = self.dir.metadata(&rel).map_err(|e| self.io(path, e))?;
        if !meta.is_dir() {
            return Err(AccessError::NotADirectory { path: path.to_owned(), kind: kind_of(&meta) });
        }
        if rel.components().any(|c| !matches!(c, Component::CurDir)) {
            self.check_real_location(path, &rel)?;
        }
        let entries = self.dir.read_dir(&rel).map_err(|e| self.io(path, e))?;
        let mut names = Vec::new();
        let mut total = 0usize;
        for entry in entries {
            let entry = entry.map_err(|e| self.io(path, e))?;
            total += 1;
            let mut name = listed_name(&entry.file_name());
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                name.push('/');
            }
            names.push(name);
        }
        names.sort();
        names.truncate(MAX_ENTRIES);
        Ok((names, total))
    }
}

/// A directory entry's name as one unambiguous line: a name with a control
/// character (a newline, say), a quote or a backslash, or one that is not
/// UTF-8, is written quoted with escapes (`"a\nb"`, `"c\xff"`).
fn listed_name(name: &std::ffi::OsStr) -> String {
    // Controls, and bidi controls that make a name read differently than it is.
    let hidden = |c: char| {
        c.is_control()
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    };
    let plain =
        name.to_str().filter(|n| !n.starts_with('"') && !n.chars().any(|c| hidden(c) || c == '\\'));
    if let Some(n) = plain {
        return n.to_owned();
    }
    let bytes = name.as_encoded_bytes();
    let mut out = String::from("\"");
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                c if hidden(c) => {
                    out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.push('"');
    out
}

fn under_pseudo_root(path: &Path) -> bool {
    PSEUDO_ROOTS.iter().any(|root| path.starts_with(root))
}

fn kind_of(meta: &cap_std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use cap_std::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_fifo() {
            return "FIFO";
        }
        if t.is_char_device() || t.is_block_device() {
            return "device";
        }
        if t.is_socket() {
            return "socket";
        }
    }
    if meta.is_dir() {
        "directory"
    } else if meta.is_file() {
        "regular file"
    } else {
        "special file"
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn absolute_paths_outside_the_root_are_refused_lexically() {
        let ws = Workspace::open(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
        assert!(matches!(ws.read("/etc/passwd", 0), Err(AccessError::Outside { .. })));
        let inside = ws.root().join("Cargo.toml");
        let read = ws.read(inside.to_str().unwrap(), 0).unwrap();
        assert!(String::from_utf8_lossy(&read.bytes).contains("claw-cli"));
    }
}
