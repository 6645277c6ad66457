//! The exclusive per-bridge locks, held while a bridge is open so two processes never drive one bridge: an `flock`
//! on tinygrad's lock file for the bridge (`$TMPDIR/am_usb:BUS-ADDR.lock`, tinygrad `system.py`
//! `USBPCIDevice.__init__` → `System.flock_acquire(f"{devpref.lower()}_{pcibus.lower()}.lock")` with devpref `AM`
//! and pcibus `usb:BUS-ADDR`), so pilot and tinygrad exclude each other, and one on `/tmp/pilot-usb-BUS-ADDR.lock`,
//! by which `pilot smi kill-pids` finds holders.

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

/// The file tinygrad locks for bridge `usb:BUS-ADDR` (in Python's `tempfile.gettempdir()`, which follows `TMPDIR`
/// as [`std::env::temp_dir`] does).
pub fn tinygrad_lock_path(bus: u8, address: u8) -> PathBuf {
    std::env::temp_dir().join(format!("am_usb:{bus}-{address}.lock"))
}

/// Both locks of one bridge: tinygrad's first, then pilot's.
#[derive(Debug)]
pub struct BridgeLock {
    _tinygrad: DeviceLock,
    pilot: DeviceLock,
}

impl BridgeLock {
    /// Takes both locks of `usb:BUS-ADDR` without waiting: [`Error::Busy`] naming the file another process holds.
    pub fn acquire(device: &str, bus: u8, address: u8) -> Result<BridgeLock> {
        Self::acquire_at(device, &tinygrad_lock_path(bus, address), &lock_path(bus, address))
    }

    fn acquire_at(device: &str, tinygrad: &Path, pilot: &Path) -> Result<BridgeLock> {
        let tinygrad = DeviceLock::acquire(device, tinygrad)?;
        Ok(BridgeLock { _tinygrad: tinygrad, pilot: DeviceLock::acquire(device, pilot)? })
    }

    /// pilot's lock file.
    pub fn path(&self) -> &Path {
        self.pilot.path()
    }
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
    fn item5_a_bridge_tinygrad_holds_is_busy_for_pilot() {
        let dir = std::env::temp_dir().join(format!("pilot-usb-lock-tg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (tg, ours) = (dir.join("am_usb:9-9.lock"), dir.join("pilot-usb-9-9.lock"));
        let tinygrad = DeviceLock::acquire("tinygrad", &tg).unwrap();
        let err = BridgeLock::acquire_at("usb:9-9", &tg, &ours).unwrap_err();
        assert!(matches!(err, Error::Busy { .. }), "{err}");
        drop(tinygrad);
        let held = BridgeLock::acquire_at("usb:9-9", &tg, &ours).unwrap();
        assert!(matches!(DeviceLock::acquire("tinygrad", &tg), Err(Error::Busy { .. })), "tinygrad must see it busy");
        drop(held);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn item5_tinygrad_lock_name() {
        assert_eq!(tinygrad_lock_path(2, 1), std::env::temp_dir().join("am_usb:2-1.lock"));
    }

    #[test]
    fn lock_name_matches_smi() {
        assert_eq!(lock_path(2, 1), Path::new("/tmp/pilot-usb-2-1.lock"));
    }
}
