//! Opening a device by name (`pilot run --device`, `pilot_model_open`, `pilot.load(device=...)`). The real devices
//! (cpu, null, qcom, usb+amd, usb:BUS-ADDR) are always here; `cl`, `fake-kgsl`, `amd-emu` and `sim` only with the
//! cargo features of those names, and a build without one says so in one line when it is asked for.

use anyhow::bail;
use pilot_core::cpu::CpuDevice;
use pilot_core::null::NullDevice;
use pilot_core::target::{Backend, Target};
use pilot_core::Device;

/// Names [`open`] accepts in this build.
pub const AVAILABLE: &[&str] = &[
    "cpu",
    "null",
    #[cfg(feature = "cl")]
    "cl",
    "qcom",
    #[cfg(feature = "fake-kgsl")]
    "fake-kgsl",
    #[cfg(feature = "amd-emu")]
    "amd-emu",
    "usb+amd",
    "usb:BUS-ADDR",
    #[cfg(feature = "sim")]
    "sim",
];

/// The KGSL context priority (`--priority`/`QCOM_PRIORITY`, 0 highest .. 15 lowest), else tinygrad's default.
fn qcom_priority(priority: Option<u8>) -> anyhow::Result<u8> {
    match priority {
        Some(p) if p > 15 => bail!("--priority (QCOM_PRIORITY) must be 0 (highest) .. 15 (lowest), got {p}"),
        Some(p) => Ok(p),
        None => Ok(pilot_qcom::kgsl::DEFAULT_PRIORITY),
    }
}

/// The most CPU worker threads `--threads` asks for (far more than any machine pilot runs on has cores).
pub const MAX_THREADS: usize = 1024;

/// `--threads` (1 ..= [`MAX_THREADS`]), else one per host core.
fn host_threads(threads: Option<usize>) -> anyhow::Result<usize> {
    match threads {
        Some(n) if !(1..=MAX_THREADS).contains(&n) => bail!("--threads must be 1 .. {MAX_THREADS}, got {n}"),
        Some(n) => Ok(n),
        None => Ok(std::thread::available_parallelism().map_or(1, usize::from)),
    }
}

/// How to open a device: CPU threads, per-op profiling, the QCOM context priority, and the most host memory
/// the AMD emulator hands out as VRAM (`--max-memory`; default: half the host's, at most 24 GiB).
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceOptions {
    pub threads: Option<usize>,
    pub profile: bool,
    pub priority: Option<u8>,
    pub max_memory: Option<u64>,
}

/// Opens `name`, or the device named as the artifact's backend when `name` is `None`. Whether the
/// device runs the artifact is the device's to say ([`Device::runs`], asked by the session).
pub fn open(name: Option<&str>, target: &Target, opts: DeviceOptions) -> anyhow::Result<Box<dyn Device>> {
    // `max_memory` serves only the AMD emulator.
    #[cfg_attr(not(feature = "amd-emu"), allow(unused_variables))]
    let DeviceOptions { threads, profile, priority, max_memory } = opts;
    let name = name.unwrap_or(target.backend.name());
    Ok(match name {
        "cpu" => {
            let threads = host_threads(threads)?;
            let device = CpuDevice::try_new(threads).map_err(|e| anyhow::anyhow!("--threads {threads}: {e}"))?;
            Box::new(device.with_profiling(profile))
        }
        "null" => Box::new(NullDevice::new(target.arch.name())),
        // The OpenCL device: $PILOT_CL_DEVICE ("platform:device") picks one, else the first GPU.
        #[cfg(feature = "cl")]
        "cl" => Box::new(pilot_cl::ClDevice::open(None)?.with_profiling(profile)),
        #[cfg(not(feature = "cl"))]
        "cl" => bail!("this pilot was built without the OpenCL device (cargo feature `cl`)"),
        #[cfg(not(feature = "fake-kgsl"))]
        "fake-kgsl" => bail!("this pilot was built without the fake KGSL (cargo feature `fake-kgsl`)"),
        // The Adreno 630 through /dev/kgsl-3d0.
        "qcom" => Box::new(pilot_qcom::device::QcomDevice::open(qcom_priority(priority)?)?),
        // The same backend over the in-process fake KGSL, which runs ir3 programs on the a6xx emulator and
        // `--qcom-compiler fake` programs on OpenCL (`PILOT_FAKE_EXEC`, crate::fake_exec).
        #[cfg(feature = "fake-kgsl")]
        "fake-kgsl" => fake_kgsl(None)?,
        // usb+amd gfx1100/gfx1201 artifacts on the RDNA3/RDNA4 emulator, workgroups spread over `--threads`.
        #[cfg(feature = "amd-emu")]
        "amd-emu" => {
            let threads = host_threads(threads)?;
            Box::new(
                match max_memory {
                    Some(bytes) => pilot_rdna3::device::EmuDevice::with_max_vram(threads, bytes),
                    None => pilot_rdna3::device::EmuDevice::new(threads),
                }
                .with_arch(target.arch),
            )
        }
        #[cfg(not(feature = "amd-emu"))]
        "amd-emu" => bail!("this pilot was built without the AMD emulator (cargo feature `amd-emu`)"),
        // The AMD GPU behind the first USB bridge, or the one named usb:BUS-ADDR.
        _ if Backend::parse(name) == Ok(Backend::UsbAmd) => Box::new(open_usb_amd(None)?),
        _ if name.starts_with("usb:") => {
            let Some(which) = parse_usb_name(name) else { bail!("device `{name}`: expected usb:BUS-ADDR") };
            Box::new(open_usb_amd(Some(which))?)
        }
        // The simulated bridge and GPU (the board the artifact was compiled for).
        #[cfg(feature = "sim")]
        "sim" => Box::new(open_sim_amd(target)?),
        #[cfg(not(feature = "sim"))]
        "sim" => bail!("this pilot was built without the simulated GPU (cargo feature `sim`)"),
        other => bail!("unknown device `{other}` (available: {})", AVAILABLE.join(", ")),
    })
}

/// The QCOM backend over the in-process fake KGSL, whose dispatches run as `PILOT_FAKE_EXEC` says
/// ([`crate::fake_exec`]); with `capture`, the fake records its first submission as an `.rd` file there.
#[cfg(feature = "fake-kgsl")]
pub fn fake_kgsl(capture: Option<pilot_qcom::fake::rd::RdCapture>) -> anyhow::Result<Box<dyn Device>> {
    use crate::fake_exec::{FakeExec, Selecting};
    let executor = Selecting::new(FakeExec::from_env()?).map_err(|e| anyhow::anyhow!("fake-kgsl: {e}"))?;
    let mut fake = pilot_qcom::fake::FakeKgsl::new().with_executor(Box::new(executor));
    if let Some(capture) = capture {
        fake = fake.with_rd_capture(capture);
    }
    Ok(Box::new(pilot_qcom::device::QcomDevice::with_file(Box::new(fake), "fake-kgsl")?))
}

/// `usb:BUS-ADDR` as (bus, address).
pub fn parse_usb_name(s: &str) -> Option<(u8, u8)> {
    let (bus, addr) = s.strip_prefix("usb:")?.split_once('-')?;
    Some((bus.parse().ok()?, addr.parse().ok()?))
}

/// Whether to skip a partial boot (tinygrad's `AM_RESET=1`).
fn amd_boot_options() -> pilot_amd::boot::BootOptions {
    pilot_amd::boot::BootOptions { force_reset: std::env::var("AM_RESET").as_deref() == Ok("1") }
}

fn open_usb_amd(which: Option<(u8, u8)>) -> anyhow::Result<pilot_amd::device::AmdDevice> {
    let (t, lock) = pilot_usb_bridge::usb::open(which)?;
    let bridge = pilot_usb_bridge::Bridge::open(t, Some(lock))?;
    let dir = pilot_amd::firmware::firmware_dir();
    Ok(pilot_amd::device::AmdDevice::open(bridge, &dir, amd_boot_options())?)
}

/// VRAM of the simulated board (`PILOT_SIM_VRAM_MB`, a power of two; default 512).
#[cfg(feature = "sim")]
fn open_sim_amd(target: &Target) -> anyhow::Result<pilot_amd::device::AmdDevice> {
    use pilot_usb_sim::{Board, SimConfig, Simulator};
    let mb: u64 =
        match std::env::var("PILOT_SIM_VRAM_MB") {
            Ok(v) => v.parse().ok().filter(|m: &u64| m.is_power_of_two() && (256..=32 << 10).contains(m)).ok_or_else(
                || anyhow::anyhow!("PILOT_SIM_VRAM_MB must be a power of two from 256 to 32768, got {v:?}"),
            )?,
            Err(_) => 512,
        };
    let board = if target.arch == pilot_core::target::Arch::Gfx1201 { Board::Navi48 } else { Board::Navi31 };
    let dir = pilot_amd::firmware::firmware_dir();
    let cfg = SimConfig { vram_bytes: mb << 20, board, firmware_dir: Some(dir.clone()), ..SimConfig::default() };
    let sim = Simulator::try_new(cfg).map_err(anyhow::Error::msg)?;
    let bridge = pilot_usb_bridge::Bridge::open(sim.transport(), None)?;
    Ok(pilot_amd::device::AmdDevice::open(bridge, &dir, amd_boot_options())?)
}
