//! `pilot run --rd-capture FILE`: the step's submission on the fake KGSL as Mesa's `.rd` capture, for `cffdump`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use pilot_core::Device;

#[cfg(feature = "fake-kgsl")]
type Handle = pilot_qcom::fake::rd::RdCapture;
/// Without the fake KGSL there is no capture: [`RdCaptureOut::new`] fails and no value exists.
#[cfg(not(feature = "fake-kgsl"))]
type Handle = std::convert::Infallible;

/// Where the capture goes and the handle the fake KGSL fills.
pub struct RdCaptureOut {
    path: PathBuf,
    handle: Handle,
}

impl RdCaptureOut {
    /// Checks the request before anything runs: the device is the fake KGSL (named or implied) and `path` is a file
    /// pilot may write that is not the artifact.
    pub fn new(path: &Path, device: Option<&str>, artifact: &Path) -> anyhow::Result<Self> {
        if let Some(d) = device.filter(|d| *d != "fake-kgsl") {
            bail!("--rd-capture records what the fake KGSL sees: it needs --device fake-kgsl, not `{d}`");
        }
        let shown = || format!("--rd-capture {}", path.display());
        pilot_core::fsio::output_target(path).with_context(shown)?;
        pilot_core::fsio::refuse_same_file(path, &[artifact]).with_context(shown)?;
        #[cfg(not(feature = "fake-kgsl"))]
        bail!("--rd-capture: this pilot was built without the fake KGSL (cargo feature `fake-kgsl`)");
        #[cfg(feature = "fake-kgsl")]
        Ok(RdCaptureOut { path: path.to_path_buf(), handle: Handle::new() })
    }

    /// The fake KGSL device that fills this capture with its first submission.
    pub fn device(&self) -> anyhow::Result<Box<dyn Device>> {
        #[cfg(feature = "fake-kgsl")]
        return crate::devices::fake_kgsl(Some(self.handle.clone()));
        #[cfg(not(feature = "fake-kgsl"))]
        match self.handle {}
    }

    /// Writes the captured submission atomically; an error when nothing was submitted or it could not be captured.
    pub fn write(self) -> anyhow::Result<()> {
        let shown = || format!("--rd-capture {}", self.path.display());
        let file = self.captured().with_context(shown)?;
        pilot_core::fsio::write_atomic(&self.path, &file).with_context(shown)?;
        eprintln!("wrote {} ({} bytes: the first step's submission)", self.path.display(), file.len());
        Ok(())
    }

    #[cfg(feature = "fake-kgsl")]
    fn captured(&self) -> anyhow::Result<Vec<u8>> {
        match self.handle.take() {
            Some(file) => file.map_err(anyhow::Error::msg),
            None => bail!("no submission reached the fake KGSL"),
        }
    }

    #[cfg(not(feature = "fake-kgsl"))]
    fn captured(&self) -> anyhow::Result<Vec<u8>> {
        match self.handle {}
    }
}
