//! A test's own directory under the system's temporary directory, removed when the
//! test is done with it — so that a test run leaves nothing behind (a restate-server's
//! data alone is ~220 MB; a few hundred runs filled a disk).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A fresh, empty directory `orch-<name>-<pid>-<n>` under [`std::env::temp_dir`],
/// removed with everything in it on drop.
///
/// When it is dropped while its thread panics (a failing test), it is kept and its
/// path printed, so that the logs a test left there can be read.
#[derive(Debug)]
pub struct Scratch {
    path: PathBuf,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

impl Scratch {
    /// Creates the directory (empty: one left by an earlier process of the same id is
    /// removed first).
    ///
    /// # Panics
    /// When the directory cannot be created (a test cannot go on without it).
    pub fn new(name: &str) -> Scratch {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("orch-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        if let Err(e) = std::fs::create_dir_all(&path) {
            panic!("creating {}: {e}", path.display());
        }
        Scratch { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `self.path().join(part)`.
    pub fn join(&self, part: impl AsRef<Path>) -> PathBuf {
        self.path.join(part)
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.path.as_os_str()
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("(kept for reading: {})", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Scratch;

    #[test]
    fn removed_on_drop_and_distinct() {
        let a = Scratch::new("scratch-test");
        let b = Scratch::new("scratch-test");
        assert_ne!(a.path(), b.path());
        std::fs::write(a.join("file"), b"x").unwrap();
        std::fs::create_dir(a.join("sub")).unwrap();
        let path = a.path().to_owned();
        drop(a);
        assert!(!path.exists());
        assert!(b.path().is_dir());
    }

    #[test]
    fn kept_when_its_test_fails() {
        let path = std::thread::spawn(|| {
            let s = Scratch::new("scratch-panic");
            let path = s.path().to_owned();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                let _s = s;
                panic!("a failing test");
            }));
            assert!(result.is_err());
            path
        })
        .join()
        .unwrap();
        assert!(path.is_dir());
        std::fs::remove_dir_all(path).unwrap();
    }
}
