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

/// The temporary name an output file has until it is complete (`OUT.partial`).
pub fn partial_path(out: &Path) -> PathBuf {
    let mut name = out.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
