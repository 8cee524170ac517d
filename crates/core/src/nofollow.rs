//! Writing below a root without following links. A user names a root (a run directory,
//! the data directory, an `--out` folder) and may make it a link: that is their choice.
//! Below it, every folder harness writes in is opened with `O_NOFOLLOW` relative to the
//! folder above (`openat`), created there if missing (`mkdirat`), and files are created
//! inside the open folder with `O_CREAT | O_EXCL | O_NOFOLLOW` and renamed within it
//! (`renameat`). A link planted anywhere below the root, even between a check and a write,
//! is therefore never written through; a link or a non-regular file at the final path is
//! refused. By hand on rustix because no crate writes "below a root, refusing links"
//! (cap-std confines paths to a root but follows the links inside it).

use std::io::Write;
use std::path::{Component, Path, PathBuf};

/// The error for a link (or something else that is not a folder or file) where harness
/// writes: names the path and the fix.
pub fn link_refused(path: &Path, what: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!(
            "{}: {what} is where harness writes; harness does not write through links or into special files. Fix: remove it (or put a real folder there) and run again",
            path.display()
        ),
    )
}

/// An open folder below a root, reached without following a link.
#[derive(Debug)]
pub struct Dir {
    #[cfg(unix)]
    fd: std::os::fd::OwnedFd,
    path: PathBuf,
}

/// The parts of `rel`, which must be relative and plain (no `..`, no root): a path harness
/// builds, so anything else is a bug named in the error.
fn plain_parts(rel: &Path) -> std::io::Result<Vec<&std::ffi::OsStr>> {
    rel.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| match c {
            Component::Normal(p) => Ok(p),
            _ => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{}: not a plain relative path", rel.display()),
            )),
        })
        .collect()
}

impl Dir {
    /// Opens `root` (following a link there: the user named it) and then each folder of
    /// `rel` below it without following links, creating missing ones when `create`.
    pub fn open_below(root: &Path, rel: &Path, create: bool) -> std::io::Result<Dir> {
        let parts = plain_parts(rel)?;
        if create {
            std::fs::create_dir_all(root)?;
        }
        let mut dir = Dir::open_root(root)?;
        for part in parts {
            dir = dir.subdir(Path::new(part), create)?;
        }
        Ok(dir)
    }

    /// The folder's path (for messages and for readers).
    pub fn path(&self) -> &Path {
        &self.path
    }

    #[cfg(unix)]
    fn open_root(root: &Path) -> std::io::Result<Dir> {
        use rustix::fs::{Mode, OFlags};
        let fd = rustix::fs::open(
            root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| named(root, e.into()))?;
        Ok(Dir {
            fd,
            path: root.to_path_buf(),
        })
    }

    #[cfg(not(unix))]
    fn open_root(root: &Path) -> std::io::Result<Dir> {
        if !root.is_dir() {
            return Err(named(root, std::io::ErrorKind::NotFound.into()));
        }
        Ok(Dir {
            path: root.to_path_buf(),
        })
    }

    /// The folder `name` inside this one, created when missing and `create`; a link there
    /// is refused.
    #[cfg(unix)]
    pub fn subdir(&self, name: &Path, create: bool) -> std::io::Result<Dir> {
        use rustix::fs::{Mode, OFlags};
        let path = self.path.join(name);
        if create {
            match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(named(&path, e.into())),
            }
        }
        match rustix::fs::openat(
            &self.fd,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => Ok(Dir { fd, path }),
            Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
                Err(link_refused(&path, &self.describe(name)))
            }
            Err(e) => Err(named(&path, e.into())),
        }
    }

    #[cfg(not(unix))]
    pub fn subdir(&self, name: &Path, create: bool) -> std::io::Result<Dir> {
        let path = self.path.join(name);
        if std::fs::symlink_metadata(&path).is_ok_and(|m| !m.is_dir()) {
            return Err(link_refused(&path, "something other than a folder"));
        }
        if create {
            std::fs::create_dir_all(&path)?;
        }
        Ok(Dir { path })
    }

    /// What is at `name` in this folder, in words, for a refusal.
    #[cfg(unix)]
    fn describe(&self, name: &Path) -> String {
        use rustix::fs::{AtFlags, FileType};
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                FileType::Symlink => "a symbolic link".into(),
                FileType::RegularFile => "a file (where a folder belongs)".into(),
                FileType::Directory => "a folder".into(),
                _ => "a special file (fifo, device or socket)".into(),
            },
            Err(_) => "something that is not a folder".into(),
        }
    }

    /// Refuses a link or a non-regular file at `name` (a missing one is fine): renaming over
    /// a link would replace the link, not follow it, but the user put it there for a reason.
    #[cfg(unix)]
    fn check_target(&self, name: &Path) -> std::io::Result<()> {
        use rustix::fs::{AtFlags, FileType};
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => Ok(()),
            Ok(_) => Err(link_refused(&self.path.join(name), &self.describe(name))),
            Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(named(&self.path.join(name), e.into())),
        }
    }

    #[cfg(not(unix))]
    fn check_target(&self, name: &Path) -> std::io::Result<()> {
        let path = self.path.join(name);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if !m.is_file() => Err(link_refused(&path, "something other than a file")),
            _ => Ok(()),
        }
    }

    /// A new temporary file in this folder, named as [`crate::fsutil::temp_file_in`] names
    /// them (so a dead writer's leftovers are swept), created with `O_EXCL | O_NOFOLLOW`.
    /// Returns the open file and its name.
    #[cfg(unix)]
    pub fn create_temp(&self) -> std::io::Result<(std::fs::File, String)> {
        use rustix::fs::{Mode, OFlags};
        crate::fsutil::sweep_once(&self.path);
        for attempt in 0u32..64 {
            let name = crate::fsutil::temp_name(attempt);
            match rustix::fs::openat(
                &self.fd,
                name.as_str(),
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o644),
            ) {
                Ok(fd) => return Ok((std::fs::File::from(fd), name)),
                Err(rustix::io::Errno::EXIST) => continue,
                Err(e) => return Err(named(&self.path, e.into())),
            }
        }
        Err(named(
            &self.path,
            std::io::Error::other("could not create a temporary file"),
        ))
    }

    #[cfg(not(unix))]
    pub fn create_temp(&self) -> std::io::Result<(std::fs::File, String)> {
        let tmp = crate::fsutil::temp_file_in(&self.path)?;
        let (file, path) = tmp.keep().map_err(|e| e.error)?;
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        Ok((file, name))
    }

    /// Renames the temporary file `temp` of this folder to `name` (after [`Dir::check_target`]).
    #[cfg(unix)]
    pub fn persist(&self, temp: &str, name: &Path) -> std::io::Result<PathBuf> {
        let target = self.path.join(name);
        if let Err(e) = self.check_target(name) {
            let _ = rustix::fs::unlinkat(&self.fd, temp, rustix::fs::AtFlags::empty());
            return Err(e);
        }
        rustix::fs::renameat(&self.fd, temp, &self.fd, name)
            .map_err(|e| named(&target, e.into()))?;
        Ok(target)
    }

    #[cfg(not(unix))]
    pub fn persist(&self, temp: &str, name: &Path) -> std::io::Result<PathBuf> {
        let target = self.path.join(name);
        self.check_target(name)?;
        std::fs::rename(self.path.join(temp), &target)?;
        Ok(target)
    }

    /// Removes this folder's temporary file `temp` (a write that failed).
    pub fn discard(&self, temp: &str) {
        #[cfg(unix)]
        let _ = rustix::fs::unlinkat(&self.fd, temp, rustix::fs::AtFlags::empty());
        #[cfg(not(unix))]
        let _ = std::fs::remove_file(self.path.join(temp));
    }

    /// Writes `bytes` to `name` in this folder atomically (temporary file, fsync, rename),
    /// refusing a link or special file at `name`. A full disk is named as such.
    pub fn write_atomic(&self, name: &Path, bytes: &[u8]) -> std::io::Result<PathBuf> {
        self.check_target(name)?;
        let (mut file, temp) = self.create_temp()?;
        let written = file
            .write_all(bytes)
            .and_then(|()| crate::fsutil::make_readable(&file))
            .and_then(|()| file.sync_all());
        if let Err(e) = written {
            self.discard(&temp);
            return Err(crate::fsutil::disk_full(
                named(&self.path.join(name), e),
                &self.path,
            ));
        }
        drop(file);
        self.persist(&temp, name)
    }
}

/// Writes `bytes` to `path` atomically, where `path` lies below `root`: `root` may be a link
/// (the user named it), but no folder between it and the file, nor the file itself, may be
/// Writes `bytes` to `path` atomically: a temporary file beside it, fsync, then rename.
/// A full disk is named as such, with the free space left (the file at `path` is then
/// unchanged and the temporary file removed). A symbolic link or a special file at `path`
/// is refused, never written through or replaced; the folder holding it is followed if it
/// is a link (a user may name one). To refuse links in the folders below a root as well,
/// use [`write_atomic_below`].
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = crate::fsutil::parent_dir(path);
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{}: no file name", path.display()),
        )
    })?;
    let write = || -> std::io::Result<()> {
        Dir::open_below(dir, Path::new(""), true)?.write_atomic(Path::new(name), bytes)?;
        Ok(())
    };
    write().map_err(|e| crate::fsutil::disk_full(e, dir))
}

/// one ([`Dir`]). Missing folders are created.
pub fn write_atomic_below(root: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let (dir, name) = split_below(root, path)?;
    Dir::open_below(root, dir, true)?.write_atomic(Path::new(name), bytes)
}

/// `path` relative to `root`, split into its folder and its file name.
fn split_below<'a>(
    root: &Path,
    path: &'a Path,
) -> std::io::Result<(&'a Path, &'a std::ffi::OsStr)> {
    let rel = path.strip_prefix(root).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not below {}", path.display(), root.display()),
        )
    })?;
    let name = rel.file_name().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{}: no file name", path.display()),
        )
    })?;
    Ok((rel.parent().unwrap_or(Path::new("")), name))
}

/// `e` with the path it concerns in its message.
fn named(path: &Path, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn writes_below_the_root_and_creates_folders() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("a/b/c.txt");
        write_atomic_below(t.path(), &p, b"x").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"x");
        write_atomic_below(t.path(), &p, b"y").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"y");
        let left: Vec<_> = std::fs::read_dir(t.path().join("a/b")).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file left");
    }

    #[test]
    fn a_root_that_is_a_link_is_followed_but_links_below_it_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().join("real");
        let victim = t.path().join("victim");
        std::fs::create_dir_all(&real).unwrap();
        std::fs::create_dir_all(&victim).unwrap();
        std::fs::write(victim.join("r.json"), "theirs").unwrap();
        // The root may be a link: the user named it.
        let root = t.path().join("root");
        symlink(&real, &root).unwrap();
        write_atomic_below(&root, &root.join("x.json"), b"1").unwrap();
        assert!(real.join("x.json").is_file());
        // A folder below it that is a link: refused, nothing written there.
        symlink(&victim, real.join("results")).unwrap();
        let err = write_atomic_below(&root, &root.join("results/r.json"), b"mine")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("symbolic link") && err.contains("results"),
            "{err}"
        );
        assert_eq!(
            std::fs::read_to_string(victim.join("r.json")).unwrap(),
            "theirs"
        );
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 1);
        // The file itself a link, or a fifo: refused, the target untouched.
        symlink(victim.join("r.json"), real.join("y.json")).unwrap();
        let err = write_atomic_below(&root, &root.join("y.json"), b"mine")
            .unwrap_err()
            .to_string();
        assert!(err.contains("symbolic link"), "{err}");
        assert_eq!(
            std::fs::read_to_string(victim.join("r.json")).unwrap(),
            "theirs"
        );
        rustix::fs::mknodat(
            rustix::fs::CWD,
            real.join("fifo"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        let err = write_atomic_below(&root, &root.join("fifo"), b"x")
            .unwrap_err()
            .to_string();
        assert!(err.contains("special file"), "{err}");
    }

    #[test]
    fn paths_outside_the_root_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let err = write_atomic_below(t.path(), Path::new("/etc/x"), b"1").unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        let err = write_atomic_below(t.path(), &t.path().join("../x"), b"1").unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    }
}
