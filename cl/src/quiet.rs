//! Keeping the OpenCL implementation's own compiler chatter off the process's stderr.
//!
//! PoCL builds programs with an in-process clang that writes diagnostics such as "1 error
//! generated." straight to file descriptor 2, beside the build log the program object already
//! carries (and that pilot puts in its one-line error); no build option silences it. So a build runs
//! with fd 2 pointed at an anonymous temporary file, and what lands there is handed back to the
//! caller. The redirect is process-wide and serialized by a lock: a line another thread writes to
//! stderr during a build goes into the capture too (the caller decides what to show).

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::sync::Mutex;

static REDIRECT: Mutex<()> = Mutex::new(());

/// Runs `f` with fd 2 redirected; returns its result and what was written to fd 2 meanwhile. If the
/// redirect cannot be set up, `f` runs with stderr untouched and the capture is empty.
pub(crate) fn capture_stderr<T>(f: impl FnOnce() -> T) -> (T, String) {
    let _serial = REDIRECT.lock().unwrap_or_else(|p| p.into_inner());
    let Some((mut file, saved)) = redirect() else {
        return (f(), String::new());
    };
    let out = f();
    let _ = std::io::stderr().flush();
    // Restores the original stderr, whatever happened in between.
    let _ = nix::unistd::dup2(saved, 2);
    let _ = nix::unistd::close(saved);
    let mut text = String::new();
    if file.seek(SeekFrom::Start(0)).is_ok() {
        // Capped: a runaway compiler cannot make us hold more than this.
        let _ = (&mut file).take(1 << 20).read_to_string(&mut text);
    }
    (out, text)
}

/// Points fd 2 at a fresh temporary file; returns the file and a duplicate of the old fd 2.
fn redirect() -> Option<(std::fs::File, i32)> {
    let file = tempfile::tempfile().ok()?;
    let _ = std::io::stderr().flush();
    let saved = nix::unistd::dup(2).ok()?;
    if nix::unistd::dup2(file.as_raw_fd(), 2).is_err() {
        let _ = nix::unistd::close(saved);
        return None;
    }
    Some((file, saved))
}

#[cfg(test)]
mod tests {
    #[test]
    fn captures_fd2_and_restores_it() {
        let (v, text) = super::capture_stderr(|| {
            // SAFETY: writes a valid buffer of the given length to fd 2.
            let n = unsafe { nix::libc::write(2, b"3 errors generated.\n".as_ptr().cast(), 20) };
            n + 1
        });
        assert_eq!((v, text.as_str()), (21, "3 errors generated.\n"));
        let (_, empty) = super::capture_stderr(|| ());
        assert_eq!(empty, "");
    }
}
