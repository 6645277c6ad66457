//! Opening a device by name for `--device`.

use anyhow::bail;
use pilot_core::artifact::Target;
use pilot_core::cpu::CpuDevice;
use pilot_core::null::NullDevice;
use pilot_core::Device;

/// Names `--device` accepts in this build.
#[cfg(feature = "cl")]
pub const AVAILABLE: &[&str] = &["cpu", "null", "cl"];
#[cfg(not(feature = "cl"))]
pub const AVAILABLE: &[&str] = &["cpu", "null"];

/// Opens `name`, or the artifact's own backend when `name` is `None`.
pub fn open(name: Option<&str>, target: &Target, threads: Option<usize>) -> anyhow::Result<Box<dyn Device>> {
    open_with(name, target, threads, false)
}

/// [`open`], with per-op profiling where the device supports it.
pub fn open_with(
    name: Option<&str>,
    target: &Target,
    threads: Option<usize>,
    profile: bool,
) -> anyhow::Result<Box<dyn Device>> {
    let name = name.unwrap_or(&target.backend);
    Ok(match name {
        "cpu" => {
            let threads = match threads {
                Some(0) => bail!("--threads must be at least 1"),
                Some(n) => n,
                None => std::thread::available_parallelism().map_or(1, usize::from),
            };
            Box::new(CpuDevice::new(threads).with_profiling(profile))
        }
        "null" => Box::new(NullDevice::new(&target.arch)),
        // The OpenCL device: $PILOT_CL_DEVICE ("platform:device") picks one, else the first GPU.
        #[cfg(feature = "cl")]
        "cl" => Box::new(pilot_cl::ClDevice::open(None)?.with_profiling(profile)),
        #[cfg(not(feature = "cl"))]
        "cl" => bail!("this pilot was built without the OpenCL device (cargo feature `cl`)"),
        "qcom" | "fake-kgsl" | "usb+amd" => {
            bail!("device `{name}` is not available in this build yet (available: {})", AVAILABLE.join(", "))
        }
        other => bail!("unknown device `{other}` (available: {})", AVAILABLE.join(", ")),
    })
}
