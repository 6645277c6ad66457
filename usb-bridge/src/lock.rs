//! The exclusive per-bridge lock: an `flock` on `/tmp/pilot-usb-BUS-ADDR.lock`, held while a bridge is open,
//! so two processes never drive one bridge (`pilot smi kill-pids` finds holders by this name).

use crate::error::{Error, Result};
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

/// Directory of pilot's device lock files.
pub const LOCK_DIR: &str = "/tmp";

/// The lock file of bridge `usb:BUS-ADDR`.
pub fn lock_path(bus: u8, address: u8) -> PathBuf {
    Path::new(LOCK_DIR).join(format!("pilot-usb-{bus}-{address}.lock"))
}

/// A held lock; dropping it releases the lock.
#[derive(Debug)]
pub struct DeviceLock {
    _flock: Flock<File>,
    path: PathBuf,
}

impl DeviceLock {
    /// Takes the lock at `path` without waiting: [`Error::Busy`] when another open file holds it.
    pub fn acquire(device: &str, path: &Path) -> Result<DeviceLock> {
        let io_err = |source| Error::Lock { device: device.to_string(), path: path.to_path_buf(), source };
        let file = OpenOptions::new().create(true).truncate(false).write(true).open(path).map_err(io_err)?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(flock) => Ok(DeviceLock { _flock: flock, path: path.to_path_buf() }),
            Err((_, Errno::EWOULDBLOCK)) => Err(Error::Busy { device: device.to_string(), lock: path.to_path_buf() }),
            Err((_, e)) => Err(io_err(e.into())),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_is_busy_until_the_first_drops() {
        let dir = std::env::temp_dir().join(format!("pilot-usb-lock-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("pilot-usb-9-9.lock");
        let first = DeviceLock::acquire("usb:9-9", &path).unwrap();
        let err = DeviceLock::acquire("usb:9-9", &path).unwrap_err();
        assert!(matches!(err, Error::Busy { .. }), "{err}");
        assert_eq!(err.to_string(), format!("usb:9-9: busy: another process holds {}", path.display()));
        drop(first);
        DeviceLock::acquire("usb:9-9", &path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn lock_name_matches_smi() {
        assert_eq!(lock_path(2, 1), Path::new("/tmp/pilot-usb-2-1.lock"));
    }
}
