//! A tool's scratch directory for one build.

use std::path::PathBuf;

use crate::error::{CompileError, Result};

/// `$TMPDIR/pilot-<tool>-<pid>-<n>`: removed when dropped (every return and unwind) and, while it
/// exists, when a signal kills the process (see `pilot_core::fsio::install_signal_cleanup`).
pub struct Scratch {
    pub dir: PathBuf,
    _on_signal: pilot_core::fsio::RemoveOnSignal,
}

impl Scratch {
    pub fn new(tool: &str) -> Result<Scratch> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("pilot-{tool}-{}-{n}", std::process::id()));
        // Registered before it exists: a signal between the two still finds it.
        let on_signal = pilot_core::fsio::remove_on_signal(&dir);
        std::fs::create_dir_all(&dir).map_err(|source| CompileError::Io { path: dir.display().to_string(), source })?;
        Ok(Scratch { dir, _on_signal: on_signal })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
