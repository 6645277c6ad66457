//! File access that hostile paths cannot turn against the machine.
//!
//! Contracts:
//! - Reads ([`open_regular`], [`read_regular`]) accept only regular files. The path is checked with
//!   `stat` before it is opened (opening some device nodes has side effects), then opened with
//!   `O_NONBLOCK` (a FIFO swapped in meanwhile cannot block `open`) and checked again with `fstat`.
//!   [`read_regular`] refuses a file larger than its cap before reading a byte.
//! - Writes go to [`output_target`]: the path itself, or the final target of a symlink (the link is
//!   written through, never replaced). A device node, FIFO, socket, directory or dangling link is
//!   refused. [`refuse_same_file`] refuses an output that is one of the inputs (same device and inode).
//! - Temporary files and scratch directories are registered with [`remove_on_signal`] while they
//!   exist; after [`install_signal_cleanup`], SIGINT, SIGTERM and SIGHUP remove every registered
//!   path before the process dies of the signal.
//!
//! Every error is an [`io::Error`] whose Display is one line without the path (callers add it).

use std::fs::{File, FileType, Metadata};
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::sys::signal::{raise, signal, SigHandler, SigSet, Signal};

/// What a file type is called in errors.
fn kind_name(t: FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_symlink() {
        "a symlink"
    } else {
        "not a regular file"
    }
}

fn not_regular(t: FileType) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("is {}, not a regular file", kind_name(t)))
}

fn check_regular(m: &Metadata) -> io::Result<()> {
    if m.file_type().is_file() {
        Ok(())
    } else {
        Err(not_regular(m.file_type()))
    }
}

/// Opens `path` for reading if it is a regular file (after following symlinks), without ever
/// blocking in `open` or opening a device node.
pub fn open_regular(path: &Path) -> io::Result<File> {
    check_regular(&std::fs::metadata(path)?)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC).bits())
        .open(path)?;
    check_regular(&file.metadata()?)?;
    // Regular files ignore O_NONBLOCK; cleared all the same so the descriptor is an ordinary one.
    let flags = OFlag::from_bits_truncate(fcntl(file.as_raw_fd(), FcntlArg::F_GETFL)?);
    fcntl(file.as_raw_fd(), FcntlArg::F_SETFL(flags - OFlag::O_NONBLOCK))?;
    Ok(file)
}

/// Reads the whole regular file at `path`, refusing one of more than `cap` bytes before reading.
pub fn read_regular(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    let file = open_regular(path)?;
    let size = file.metadata()?.len();
    check_cap(size, cap)?;
    let mut out = Vec::new();
    out.try_reserve_exact(size as usize).map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, too_big(size)))?;
    // `take`: a file that grows while being read still stops at the cap.
    file.take(cap + 1).read_to_end(&mut out)?;
    check_cap(out.len() as u64, cap)?;
    Ok(out)
}

/// [`read_regular`] as UTF-8 text.
pub fn read_regular_string(path: &Path, cap: u64) -> io::Result<String> {
    String::from_utf8(read_regular(path, cap)?)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("not UTF-8 text: {}", e.utf8_error())))
}

fn too_big(size: u64) -> String {
    format!("{size} bytes cannot be held in memory")
}

fn check_cap(size: u64, cap: u64) -> io::Result<()> {
    if size > cap {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("is {size} bytes, more than the {cap} this file may have"),
        ));
    }
    Ok(())
}

/// Where a write to `path` lands: `path` when it does not exist or is a regular file, the final
/// target when it is a symlink to a regular file. Anything else is refused: a device node, FIFO,
/// socket or directory (at the path or behind a link) and a dangling link.
pub fn output_target(path: &Path) -> io::Result<PathBuf> {
    let m = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(path.to_path_buf()),
        r => r?,
    };
    if !m.file_type().is_symlink() {
        check_regular(&m)?;
        return Ok(path.to_path_buf());
    }
    let target = std::fs::canonicalize(path).map_err(|e| {
        let why = format!("is a symlink whose target cannot be resolved ({e}): links are written through, not created");
        io::Error::new(e.kind(), why)
    })?;
    let kind = std::fs::metadata(&target)?.file_type();
    if !kind.is_file() {
        let why = format!("is a symlink to {}, not a regular file", kind_name(kind));
        return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
    }
    Ok(target)
}

/// Creates (or truncates) the regular file [`output_target`] gives for `path`, for output that is
/// streamed rather than written atomically (logs). The open is non-blocking and checked with
/// `fstat`, so a FIFO or device swapped in after the check is refused, not written.
pub fn create_regular(path: &Path) -> io::Result<File> {
    let target = output_target(path)?;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags((OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW).bits())
        .open(target)?;
    check_regular(&file.metadata()?)?;
    let flags = OFlag::from_bits_truncate(fcntl(file.as_raw_fd(), FcntlArg::F_GETFL)?);
    fcntl(file.as_raw_fd(), FcntlArg::F_SETFL(flags - OFlag::O_NONBLOCK))?;
    file.set_len(0)?;
    Ok(file)
}

/// Writes `bytes` to `path` atomically: to a temporary file in the same directory (removed on error and on a
/// handled signal), fsync, then rename over [`output_target`]'s file. An existing file keeps its permissions (a new
/// one gets 0o644) and is untouched on any error.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let target = output_target(path)?;
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let perms = std::fs::metadata(&target).map_or_else(|_| std::fs::Permissions::from_mode(0o644), |m| m.permissions());
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    let _registered = remove_on_signal(tmp.path());
    tmp.as_file().set_permissions(perms)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(&target).map_err(|e| e.error)?;
    Ok(())
}

/// Whether `a` and `b` name the same existing file (same device and inode, links followed).
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Refuses writing `output` when it is the same file as one of `inputs`.
pub fn refuse_same_file(output: &Path, inputs: &[&Path]) -> io::Result<()> {
    match inputs.iter().find(|i| same_file(output, i)) {
        Some(input) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("is the input {}: refusing to overwrite it (choose another output)", input.display()),
        )),
        None => Ok(()),
    }
}

static REGISTERED: Mutex<Vec<(u64, PathBuf)>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// A path removed if the process is killed by a handled signal while this value lives. Dropping it
/// only forgets the path: removing it on the ordinary paths stays its owner's job.
#[must_use = "the path is forgotten when this is dropped"]
#[derive(Debug)]
pub struct RemoveOnSignal(u64);

/// Registers `path` (a file, or a directory removed with its contents) for [`install_signal_cleanup`].
pub fn remove_on_signal(path: &Path) -> RemoveOnSignal {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    lock_registered().push((id, path.to_path_buf()));
    RemoveOnSignal(id)
}

impl Drop for RemoveOnSignal {
    fn drop(&mut self) {
        lock_registered().retain(|(id, _)| *id != self.0);
    }
}

fn lock_registered() -> std::sync::MutexGuard<'static, Vec<(u64, PathBuf)>> {
    // A panic while holding the lock leaves a consistent Vec: keep using it.
    REGISTERED.lock().unwrap_or_else(|p| p.into_inner())
}

/// The paths registered now (for tests and diagnostics).
pub fn registered() -> Vec<PathBuf> {
    lock_registered().iter().map(|(_, p)| p.clone()).collect()
}

/// Removes every registered path; returns how many were removed.
fn remove_registered() -> usize {
    let paths = lock_registered();
    let mut removed = 0;
    for (_, p) in paths.iter() {
        let r = match std::fs::symlink_metadata(p) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
            Ok(_) => std::fs::remove_file(p),
            Err(e) => Err(e),
        };
        removed += usize::from(r.is_ok());
    }
    removed
}

/// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread and starts a thread that waits for them
/// with `sigwait`, removes the registered paths, and lets the process die of the signal (so the
/// parent sees the usual status). Call it first thing in `main`, before any thread starts: threads
/// inherit the mask. (Child processes do not: Rust's `Command` resets the mask in the child.) The
/// cleanup runs in an ordinary thread, not in a signal handler, so it may lock and allocate.
pub fn install_signal_cleanup() -> io::Result<()> {
    let mut set = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(s);
    }
    set.thread_block()?;
    std::thread::Builder::new().name("pilot-signals".into()).spawn(move || {
        let Ok(sig) = set.wait() else {
            return;
        };
        remove_registered();
        // SAFETY: the default disposition installs no handler code.
        let _ = unsafe { signal(sig, SigHandler::SigDfl) };
        let mut one = SigSet::empty();
        one.add(sig);
        let _ = one.thread_unblock();
        let _ = raise(sig);
        std::process::exit(128 + sig as i32);
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::stat::{makedev, mknod, Mode, SFlag};
    use nix::unistd::mkfifo;

    /// A FIFO, a character device with /dev/null's numbers and a socket, in `dir`. The device node
    /// needs root; without it the list has no device.
    fn specials(dir: &Path) -> Vec<PathBuf> {
        let fifo = dir.join("fifo");
        mkfifo(&fifo, Mode::from_bits_truncate(0o644)).unwrap();
        let sock = dir.join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let mut out = vec![fifo, sock];
        let dev = dir.join("null");
        if mknod(&dev, SFlag::S_IFCHR, Mode::from_bits_truncate(0o666), makedev(1, 3)).is_ok() {
            out.push(dev);
        }
        out.push(dir.to_path_buf());
        out
    }

    #[test]
    fn write_atomic_replaces_keeps_permissions_and_refuses_devices() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.bin");
        write_atomic(&p, b"one").unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o644);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(write_atomic(Path::new("/dev/null"), b"x").is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file is left");
    }

    #[test]
    fn reads_refuse_everything_but_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        for p in specials(dir.path()) {
            let e = read_regular(&p, 1 << 20).unwrap_err().to_string();
            assert!(e.ends_with("not a regular file"), "{}: {e}", p.display());
            let link = dir.path().join("link");
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&p, &link).unwrap();
            assert!(open_regular(&link).is_err());
        }
        let f = dir.path().join("f");
        std::fs::write(&f, b"12345").unwrap();
        assert_eq!(read_regular(&f, 5).unwrap(), b"12345");
        let e = read_regular(&f, 4).unwrap_err().to_string();
        assert_eq!(e, "is 5 bytes, more than the 4 this file may have");
    }

    #[test]
    fn outputs_resolve_links_and_refuse_specials() {
        let dir = tempfile::tempdir().unwrap();
        for p in specials(dir.path()) {
            assert!(output_target(&p).unwrap_err().to_string().contains("not a regular file"), "{}", p.display());
            assert!(create_regular(&p).is_err(), "{}", p.display());
        }
        let real = dir.path().join("real.pkl");
        std::fs::write(&real, b"x").unwrap();
        let link = dir.path().join("link.pkl");
        std::os::unix::fs::symlink("real.pkl", &link).unwrap();
        assert_eq!(output_target(&link).unwrap(), std::fs::canonicalize(&real).unwrap());
        let new = dir.path().join("new.pkl");
        assert_eq!(output_target(&new).unwrap(), new);
        use std::io::Write;
        writeln!(create_regular(&link).unwrap(), "log").unwrap();
        assert_eq!(std::fs::read(&real).unwrap(), b"log\n");
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        let dangling = dir.path().join("dangling.pkl");
        std::os::unix::fs::symlink("missing/x", &dangling).unwrap();
        assert!(output_target(&dangling).is_err());
        assert!(same_file(&link, &real));
        assert!(!same_file(&new, &real));
        assert!(refuse_same_file(&link, &[&new, &real]).is_err());
        assert!(refuse_same_file(&new, &[&real]).is_ok());
    }

    #[test]
    fn registration_ends_with_its_guard() {
        let p = PathBuf::from("/nonexistent/pilot-registration-test");
        let guard = remove_on_signal(&p);
        assert!(registered().contains(&p));
        drop(guard);
        assert!(!registered().contains(&p));
    }
}
