//! File identity checks shared by every command that reads one file and writes another.
//!
//! Paths are compared as *files* (device and inode), not as strings: `./x.aut`, `x.aut`, a
//! symbolic link to it and a hard link to it all name the same file, and writing the output
//! would replace (or, for a streaming tool, truncate while reading) the input.

use std::io;
use std::path::{Path, PathBuf};

/// Whether `a` and `b` name the same existing file (same device and inode, symbolic links
/// followed). A path that does not exist is never the same file as another: an output that is
/// about to be created cannot be the input.
pub fn same_file(a: &Path, b: &Path) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let meta = |p: &Path| match std::fs::metadata(p) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    };
    Ok(match (meta(a)?, meta(b)?) {
        (Some(x), Some(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    })
}

/// What a path names for writing: an existing file (device, inode), or the place a new one
/// would be created (its directory resolved, so `x`, `./x` and `d/../x` agree).
#[derive(PartialEq)]
enum Target {
    Existing(u64, u64),
    New(PathBuf),
}

fn target(p: &Path) -> io::Result<Target> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(p) {
        Ok(m) => return Ok(Target::Existing(m.dev(), m.ino())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    // A dangling symbolic link is followed: writing through it creates its target.
    let mut p = p.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&p)?;
                p = match p.parent() {
                    Some(dir) if to.is_relative() => dir.join(to),
                    _ => to,
                };
            }
            _ => break,
        }
    }
    let dir = match p.parent() {
        Some(d) if d.as_os_str().is_empty() => Path::new("."),
        Some(d) => d,
        None => Path::new("/"),
    };
    Ok(match (p.file_name(), std::fs::canonicalize(dir)) {
        (Some(name), Ok(dir)) => Target::New(dir.join(name)),
        // A missing directory: the file cannot be created there anyway.
        _ => Target::New(std::path::absolute(&p)?),
    })
}

/// Whether writing `a` and writing `b` would write the same file: [`same_file`] for files
/// that exist, and for paths not created yet the same place (`out.slts` and
/// `./out.slts` given as two different outputs would overwrite one another).
pub fn same_target(a: &Path, b: &Path) -> io::Result<bool> {
    Ok(target(a)? == target(b)?)
}

/// One file a command reads or writes, named as the user gave it: `role` says which
/// (`the model file`, `-o`, `--metrics`); `input` when the command reads it.
pub struct Role<'a> {
    pub role: String,
    pub path: &'a Path,
    pub input: bool,
}

/// Refuses, before anything is written, any two of `files` that are the same file (existing
/// or to be created, see [`same_target`]): one would overwrite the other, or the model.
pub fn check_distinct(files: &[Role]) -> Result<(), Clash> {
    // Each path examined once (a `stat`, and for a new file its directory resolved), then
    // compared pairwise; a path that cannot be examined is named as it was given.
    let targets = files
        .iter()
        .map(|f| {
            target(f.path).map_err(|source| Clash::Io {
                path: f.path.to_path_buf(),
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    for (i, a) in files.iter().enumerate() {
        for (j, b) in files.iter().enumerate().skip(i + 1) {
            if targets[i] == targets[j] {
                return Err(Clash::Shared {
                    first: (a.role.clone(), a.path.to_path_buf()),
                    second: (b.role.clone(), b.path.to_path_buf()),
                    input: a.input || b.input,
                });
            }
        }
    }
    Ok(())
}

/// Why an output path cannot be used with an input.
#[derive(Debug)]
pub enum Clash {
    /// The output (or the temporary `OUT.partial` it is written through) is the input file.
    SameFile {
        input: PathBuf,
        output: PathBuf,
        /// The path that is the input: `output` itself or its `.partial` companion.
        via: PathBuf,
    },
    /// Two files a command writes (or one it reads and one it writes), each given for its own
    /// purpose, are the same file: `(role, path)` of each, in the order given.
    Shared {
        first: (String, PathBuf),
        second: (String, PathBuf),
        /// One of them is read (the model, the metrics file plotted).
        input: bool,
    },
    /// A path could not be examined (e.g. a directory on it is not searchable).
    Io { path: PathBuf, source: io::Error },
}

impl std::fmt::Display for Clash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Clash::SameFile { input, output, via } if via == output => write!(
                f,
                "the output {} is the input {} (the same file): refusing to overwrite the input; choose another output path",
                output.display(),
                input.display()
            ),
            Clash::SameFile { input, output, via } => write!(
                f,
                "the output {} is written through {}, which is the input {} (the same file): refusing to overwrite the input; choose another output path",
                output.display(),
                via.display(),
                input.display()
            ),
            Clash::Shared {
                first: (r1, p1),
                second: (r2, p2),
                input: true,
            } => write!(
                f,
                "{r2} {} is {r1} {} (the same file): refusing to overwrite it; choose another path",
                p2.display(),
                p1.display()
            ),
            Clash::Shared {
                first: (r1, p1),
                second: (r2, p2),
                input: false,
            } => write!(
                f,
                "{r2} {} is the same file as {r1} {}: refusing to write one over the other; give each its own path",
                p2.display(),
                p1.display()
            ),
            Clash::Io { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

/// Refuses to write `output` when it, or `partial` (the temporary file it is written through,
/// renamed to `output` when complete), is the file `input`. Call it before anything is
/// created: a streaming writer would truncate its own input, and a tool that loads its input
/// first would replace it.
pub fn check_output(input: &Path, output: &Path, partial: &Path) -> Result<(), Clash> {
    for via in [output, partial] {
        match same_file(input, via) {
            Ok(false) => {}
            Ok(true) => {
                return Err(Clash::SameFile {
                    input: input.to_path_buf(),
                    output: output.to_path_buf(),
                    via: via.to_path_buf(),
                })
            }
            Err(source) => {
                return Err(Clash::Io {
                    path: via.to_path_buf(),
                    source,
                })
            }
        }
    }
    Ok(())
}

/// A clash is a command-line mistake (exit 2); a path that cannot be examined, an I/O error.
impl From<Clash> for crate::error::ExploreError {
    fn from(c: Clash) -> Self {
        match c {
            Clash::Io { path, source } => crate::error::LtsError::Io { path, source }.into(),
            clash => crate::error::ExploreError::Config(clash.to_string()),
        }
    }
}

impl From<Clash> for crate::error::PostError {
    fn from(c: Clash) -> Self {
        match c {
            Clash::Io { path, source } => crate::error::LtsError::Io { path, source }.into(),
            clash => crate::error::PostError::Usage(clash.to_string()),
        }
    }
}

impl From<Clash> for crate::error::PlotError {
    fn from(c: Clash) -> Self {
        match c {
            Clash::Io { path, source } => crate::error::PlotError::Io { path, source },
            clash => crate::error::PlotError::Usage(clash.to_string()),
        }
    }
}

/// Writes `bytes` to `path` as one change: into a new temporary file beside it (hidden,
/// `.NAME.PID.N.partial`, created with the permissions a plain create would give), synced,
/// then renamed over `path`. A failed write (a full disk) leaves the previous file as it
/// was and no temporary file behind. For the small files written in one go (`plot`'s SVG,
/// `--stats-json`); the LTS writers stream through [`PartialOutput`]. A path that is there
/// but is no regular file (`/dev/stdout`, a symlink, a pipe) is written in place: renaming
/// over it would replace it (run as root, `--stats-json /dev/stdout` had replaced the
/// device link with a regular file).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    if in_place(path) {
        return std::fs::File::create(path)?.write_all(bytes);
    }
    let (tmp, mut file) = create_beside(path)?;
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Whether a file can be written at `path` the way [`write_atomically`] writes it: a
/// temporary file created in its directory, and removed at once. Lets a run refuse, before
/// it starts, a file it would write only at its end (`--stats-json` in a missing or
/// read-only directory).
pub fn check_writable_beside(path: &Path) -> io::Result<()> {
    // Written in place, and not opened here: a pipe without its reader yet would block.
    if in_place(path) {
        return Ok(());
    }
    let (tmp, _) = create_beside(path)?;
    std::fs::remove_file(tmp)
}

/// Refuses an LTS output that exists and is neither a regular file nor a directory (the
/// callers say what a directory is): `/dev/stdout`, a pipe, a socket. The LTS is written
/// through `OUT.partial` and renamed over the output, which would replace the device or
/// pipe with a regular file (run as root, `-o /dev/stdout` replaced the link in `/dev`).
pub fn check_lts_output(output: &Path) -> io::Result<()> {
    match std::fs::metadata(output) {
        Ok(m) if !m.is_file() && !m.is_dir() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "is not a regular file (a device, pipe or socket): an LTS is written to a temporary file and renamed into place; give a file path",
        )),
        _ => Ok(()),
    }
}

/// Whether `path` exists and is not a regular file (a device, a symlink, a pipe): then
/// [`write_atomically`] writes through it instead of renaming a new file over it.
fn in_place(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| !m.file_type().is_file())
}

/// Creates a new, empty temporary file in `path`'s directory (0666 less the umask, as
/// `File::create`), named after `path`, this process and a counter.
fn create_beside(path: &Path) -> io::Result<(PathBuf, std::fs::File)> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let Some(name) = path.file_name() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "names no file (a directory?)",
        ));
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    loop {
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(
            ".{}.{}.partial",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let tmp = dir.join(tmp_name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            // Left by a process of the same id that was killed: take the next name.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
}

/// The temporary name an output file has until it is complete (`OUT.partial`).
pub fn partial_path(out: &Path) -> PathBuf {
    let mut name = out.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

/// The temporary file `OUT.partial` an output is written through, held under an exclusive
/// lock (`flock`) from before anything in it changes until it is renamed to `OUT` or
/// removed. A second process writing the same output (a parallel `make`, a script started
/// twice) is refused at once instead of writing into the same file, and neither truncates
/// nor deletes the first one's file. The lock goes with the process, however it ends.
pub struct PartialOutput {
    out: PathBuf,
    path: PathBuf,
    file: std::fs::File,
    /// Renamed to `OUT` or removed: no longer this process's to remove.
    done: std::cell::Cell<bool>,
}

impl PartialOutput {
    /// Locks `OUT.partial` for `out`, creating it if `create` (a new output) or requiring it
    /// (a checkpointed run continuing it). Nothing in the file changes: a new output empties
    /// it with [`PartialOutput::truncate`].
    pub fn lock(out: &Path, create: bool) -> Result<Self, crate::error::LtsError> {
        use crate::error::LtsError;
        use std::os::unix::fs::MetadataExt;
        let path = partial_path(out);
        // Errors name the output the user gave (the lock's names both).
        let io = |source| LtsError::Io {
            path: out.to_path_buf(),
            source,
        };
        // The process that held the lock may have renamed its finished file to `OUT` (or
        // removed it) between this open and the lock: the file locked is then no longer
        // `OUT.partial`, and must not be written (it may be that process's output). Open
        // again; a few rounds, as each needs another writer to finish in between.
        for _ in 0..16 {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(create)
                .truncate(false)
                .open(&path)
                .map_err(io)?;
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(LtsError::Busy {
                        output: out.to_path_buf(),
                        partial: path,
                    })
                }
                // A file system without locks (some FUSE mounts): written unlocked, as
                // before locks existed, rather than not at all.
                Err(std::fs::TryLockError::Error(e)) if lock_unsupported(&e) => {}
                Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
            }
            let locked = file.metadata().map_err(io)?;
            match std::fs::metadata(&path) {
                Ok(m) if m.dev() == locked.dev() && m.ino() == locked.ino() => {
                    return Ok(PartialOutput {
                        out: out.to_path_buf(),
                        path,
                        file,
                        done: std::cell::Cell::new(false),
                    })
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(e)),
            }
        }
        Err(LtsError::Busy {
            output: out.to_path_buf(),
            partial: path,
        })
    }

    /// The temporary file's path (`OUT.partial`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The output it becomes (`OUT`).
    pub fn output(&self) -> &Path {
        &self.out
    }

    /// A handle on the file for its writer (the lock stays with this value).
    pub fn writer(&self) -> Result<std::fs::File, crate::error::LtsError> {
        self.file.try_clone().map_err(|source| self.io(source))
    }

    /// Empties the file and puts its position at the start, for a new output (or a P/T net
    /// restarted with wider counters, which writes its output again).
    pub fn truncate(&self) -> Result<(), crate::error::LtsError> {
        use std::io::Seek;
        self.file.set_len(0).map_err(|source| self.io(source))?;
        (&self.file)
            .seek(io::SeekFrom::Start(0))
            .map_err(|source| self.io(source))?;
        Ok(())
    }

    /// Renames the finished file to `OUT`, still under the lock (released when this value
    /// is dropped), so that no other writer can have opened it as its own in between.
    pub fn rename(&self) -> Result<(), crate::error::LtsError> {
        std::fs::rename(&self.path, &self.out).map_err(|source| self.io(source))?;
        self.done.set(true);
        Ok(())
    }

    /// Removes the unfinished file (unless it was renamed), still under the lock: a file
    /// another writer has locked since is never removed.
    pub fn discard(&self) {
        if !self.done.replace(true) {
            let _ = std::fs::remove_file(&self.path);
        }
    }

    fn io(&self, source: io::Error) -> crate::error::LtsError {
        crate::error::LtsError::Io {
            path: self.out.clone(),
            source,
        }
    }
}

/// Whether `flock` failed because the file system has no locks (not because of the file).
fn lock_unsupported(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Unsupported
        || matches!(
            e.raw_os_error(),
            Some(libc::ENOLCK | libc::EOPNOTSUPP | libc::ENOSYS)
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;

    #[test]
    fn relative_symlinked_and_hard_linked_paths_are_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.aut");
        std::fs::write(&a, "x").unwrap();
        let dotted = dir.path().join(".").join("a.aut");
        let sym = dir.path().join("sym.aut");
        std::os::unix::fs::symlink(&a, &sym).unwrap();
        let hard = dir.path().join("hard.aut");
        std::fs::hard_link(&a, &hard).unwrap();
        for other in [&a, &dotted, &sym, &hard] {
            assert!(same_file(&a, other).unwrap(), "{}", other.display());
        }
        let copy = dir.path().join("copy.aut");
        std::fs::write(&copy, "x").unwrap();
        assert!(!same_file(&a, &copy).unwrap());
        assert!(!same_file(&a, &dir.path().join("new.aut")).unwrap());
        // The partial companion is checked too.
        let e = check_output(&a, &dir.path().join("o.aut"), &sym).unwrap_err();
        assert!(e.to_string().contains("sym.aut"), "{e}");
        assert!(check_output(&a, &copy, &dir.path().join("copy.aut.partial")).is_ok());
    }

    #[test]
    fn an_lts_output_that_is_a_pipe_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f.aut");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let e = check_lts_output(&fifo).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());
        check_lts_output(&dir.path().join("new.aut")).unwrap();
        std::fs::write(dir.path().join("old.aut"), "x").unwrap();
        check_lts_output(&dir.path().join("old.aut")).unwrap();
    }

    #[test]
    fn atomic_writes_go_through_what_is_not_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.json");
        std::fs::write(&target, "old").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        check_writable_beside(&link).unwrap();
        write_atomically(&link, b"new").unwrap();
        // The link is still a link, and its target has the bytes.
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        // A regular file is replaced whole, with no temporary file left.
        write_atomically(&target, b"newer").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"newer");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn a_locked_partial_output_is_refused_and_never_removed_by_the_refused() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("o.aut");
        let first = PartialOutput::lock(&out, true).unwrap();
        std::fs::write(first.path(), "first").unwrap();
        let e = PartialOutput::lock(&out, true).err().unwrap();
        assert!(matches!(e, crate::error::LtsError::Busy { .. }), "{e}");
        assert_eq!(std::fs::read(first.path()).unwrap(), b"first");
        // Renamed under the lock: the output is the first writer's, and its `discard`
        // (after a later failure) removes nothing of the next writer's.
        first.rename().unwrap();
        let second = PartialOutput::lock(&out, true).unwrap();
        second.truncate().unwrap();
        first.discard();
        drop(first);
        assert!(second.path().exists());
        assert_eq!(std::fs::read(&out).unwrap(), b"first");
        second.discard();
        assert!(!second.path().exists());
        // Continuing a checkpointed output needs the file; the error names the output.
        let e = PartialOutput::lock(&out, false).err().unwrap();
        assert!(
            e.to_string().starts_with(&format!("{}: ", out.display())),
            "{e}"
        );
    }

    #[test]
    fn paths_not_created_yet_are_compared_by_place() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("sub")).unwrap();
        let new = d.join("new.slts");
        for same in [
            d.join("./new.slts"),
            d.join("sub/../new.slts"),
            d.join("dangling"),
        ] {
            if same.ends_with("dangling") {
                std::os::unix::fs::symlink("new.slts", &same).unwrap();
            }
            assert!(same_target(&new, &same).unwrap(), "{}", same.display());
        }
        assert!(!same_target(&new, &d.join("sub/new.slts")).unwrap());
        let (metrics, dotted) = (d.join("m"), d.join("./new.slts"));
        let role = |role: &str, path| Role {
            role: role.into(),
            path,
            input: false,
        };
        let e = check_distinct(&[
            role("-o", &new),
            role("--metrics", &metrics),
            role("--stats-json", &dotted),
        ])
        .unwrap_err();
        assert!(
            e.to_string().starts_with(&format!(
                "--stats-json {} is the same file as -o",
                dotted.display()
            )),
            "{e}"
        );
        assert!(check_distinct(&[role("-o", &new), role("--metrics", &metrics)]).is_ok());
    }
}
