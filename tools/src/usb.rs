//! `pilot usb`: the ASM2464 bridge (tinygrad's custom firmware) and what is behind it.
//!
//! `list` shows the bridges on the bus; `info` brings up the PCIe side and shows the topology and the GPU's
//! BARs; `copy-speed` measures big copies both ways (tinygrad's `TestDevCopySpeeds`); `reset` power-cycles the
//! PCIe side. `--device sim` runs against the in-process bridge simulator (cargo feature `sim`).

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use pilot_usb_bridge::copy::{Copier, DeviceDma};
use pilot_usb_bridge::pcie::{bring_up, Layout, Topology};
use pilot_usb_bridge::{proto, Bridge, Stats};
use std::time::Duration;

#[derive(Subcommand)]
pub enum UsbCommand {
    /// Bridges found: name, USB id, firmware product string, PCIe link state.
    List,
    /// Bring up the PCIe side and print the topology and the GPU's BARs.
    Info(DeviceArg),
    /// Copy SIZE bytes host->GPU and back, and report MB/s, USB transactions and host CPU time.
    CopySpeed(CopySpeedArgs),
    /// Power-cycle the bridge's PCIe side (F3 off, on) and check the link trains again.
    Reset(DeviceArg),
}

#[derive(Args)]
pub struct DeviceArg {
    /// `usb:BUS-ADDR`, or `sim` for the bridge simulator; default: the first bridge found.
    #[arg(long)]
    device: Option<String>,
}

/// The most copies each way `copy-speed` makes (like `--size`, a bound on how long one command may run).
const MAX_ITERS: usize = 1000;

#[derive(Args)]
pub struct CopySpeedArgs {
    #[command(flatten)]
    device: DeviceArg,
    /// Bytes per copy.
    #[arg(long, default_value_t = 64_000_000)]
    size: usize,
    /// Copies each way.
    #[arg(long, default_value_t = 3)]
    iters: usize,
}

pub fn run(cmd: &UsbCommand) -> Result<bool> {
    match cmd {
        UsbCommand::List => list(),
        UsbCommand::Info(d) => info(d),
        UsbCommand::CopySpeed(a) => copy_speed(a),
        UsbCommand::Reset(d) => reset(d),
    }
}

/// An opened bridge and, on the simulator, the stand-in for the GPU's DMA engine.
struct Opened {
    bridge: Bridge,
    dma: Option<Box<dyn DeviceDma>>,
    simulated: bool,
}

fn open(arg: &DeviceArg, vram_hint: usize) -> Result<Opened> {
    match arg.device.as_deref() {
        Some("sim") => open_sim(vram_hint),
        Some(name) => {
            let Some(which) = crate::devices::parse_usb_name(name) else {
                bail!("unknown USB device `{name}` (expected sim or usb:BUS-ADDR)")
            };
            open_usb(Some(which))
        }
        None => open_usb(None),
    }
}

#[cfg(feature = "sim")]
fn open_sim(vram_hint: usize) -> Result<Opened> {
    use pilot_usb_sim::{SimConfig, Simulator};
    let vram = (vram_hint as u64).next_power_of_two().max(512 << 20);
    let sim = Simulator::new(SimConfig { vram_bytes: vram, ..SimConfig::default() });
    let bridge = Bridge::open(sim.transport(), None)?;
    Ok(Opened { bridge, dma: Some(Box::new(sim.dma())), simulated: true })
}

#[cfg(not(feature = "sim"))]
fn open_sim(_: usize) -> Result<Opened> {
    bail!("this pilot was built without the bridge simulator (cargo feature `sim`)")
}

fn open_usb(which: Option<(u8, u8)>) -> Result<Opened> {
    let (t, lock) = pilot_usb_bridge::usb::open(which)?;
    Ok(Opened { bridge: Bridge::open(t, Some(lock))?, dma: None, simulated: false })
}

fn link_name(ltssm: u8) -> String {
    if ltssm == proto::xdata::LTSSM_L0 {
        "L0 (0x78)".to_string()
    } else {
        format!("down (LTSSM 0x{ltssm:02x})")
    }
}

fn list() -> Result<bool> {
    let found = pilot_usb_bridge::usb::list()?;
    if found.is_empty() {
        let ids = proto::BRIDGE_IDS.iter().map(|(v, p)| format!("{v:04x}:{p:04x}")).collect::<Vec<_>>();
        return Err(pilot_usb_bridge::Error::NotFound { ids: ids.join(", ") }.into());
    }
    for f in found {
        let product = f.product.clone().unwrap_or_else(|e| format!("? ({e})"));
        let link = match pilot_usb_bridge::usb::read_ltssm(&f) {
            Ok(l) => link_name(l),
            Err(e) => format!("unknown ({e})"),
        };
        println!("{}  {:04x}:{:04x}  {product:?}  link {link}", f.name(), f.vid, f.pid);
    }
    Ok(true)
}

fn info(arg: &DeviceArg) -> Result<bool> {
    let mut o = open(arg, 0)?;
    let b = &mut o.bridge;
    let ltssm = b.ltssm()?;
    println!("{}: {:?}, link {}", b.name(), b.product(), link_name(ltssm));
    let topo = bring_up(b, &Layout::default())?;
    print_topology(&topo);
    Ok(true)
}

fn class_name(class: u32) -> &'static str {
    match class >> 8 {
        0x0604 => "PCI bridge",
        0x0300 | 0x0380 => "display",
        _ => "other",
    }
}

fn size_name(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

fn print_topology(topo: &Topology) {
    for f in topo.bridges.iter().chain(std::iter::once(&topo.gpu)) {
        println!("  {}  {:04x}:{:04x}  {}", f.bdf, f.vendor, f.device, class_name(f.class));
    }
    println!("GPU {} {:04x}:{:04x}", topo.gpu.bdf, topo.gpu.vendor, topo.gpu.device);
    for bar in &topo.bars {
        let kind = match (bar.is64, bar.prefetchable) {
            (true, true) => "64-bit prefetchable",
            (true, false) => "64-bit",
            (false, true) => "32-bit prefetchable",
            (false, false) => "32-bit",
        };
        let resized = match topo.rebar {
            Some((old, new)) if bar.index == 0 && old != new => format!(" (resized from {})", size_name(old)),
            _ => String::new(),
        };
        println!("  BAR{}  0x{:x}  {}  {kind}{resized}", bar.index, bar.addr, size_name(bar.size));
    }
}

/// Deterministic bytes (xorshift64*), so a round trip checks every byte without a random-number crate.
fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

fn cpu_time() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID).map(Duration::from).unwrap_or_default()
}

struct Measured {
    time: Duration,
    cpu: Duration,
    stats: Stats,
}

fn measure(b: &mut Bridge, f: impl FnOnce(&mut Bridge) -> pilot_usb_bridge::Result<()>) -> Result<Measured> {
    let (t0, c0, s0) = (b.now(), cpu_time(), b.stats());
    f(b)?;
    let s = b.stats();
    let stats = Stats {
        control_out: s.control_out - s0.control_out,
        control_in: s.control_in - s0.control_in,
        bulk_out: s.bulk_out - s0.bulk_out,
        bulk_in: s.bulk_in - s0.bulk_in,
        bytes_out: s.bytes_out - s0.bytes_out,
        bytes_in: s.bytes_in - s0.bytes_in,
    };
    Ok(Measured { time: b.now() - t0, cpu: cpu_time() - c0, stats })
}

fn report(what: &str, size: usize, m: &Measured, simulated: bool) {
    let mb = size as f64 / 1e6;
    let ms = m.time.as_secs_f64() * 1e3;
    let tx = m.stats.transactions();
    println!(
        "{what} of {mb:.2} MB: {ms:.2} ms @ {:.1} MB/s{}  USB transactions {tx} ({:.2}/MB: {} control, {} bulk)  host CPU {:.2} ms ({:.3} ms/MB{})",
        mb / m.time.as_secs_f64().max(1e-12),
        if simulated { " (modelled)" } else { "" },
        tx as f64 / mb,
        m.stats.control_out + m.stats.control_in,
        m.stats.bulk_out + m.stats.bulk_in,
        m.cpu.as_secs_f64() * 1e3,
        m.cpu.as_secs_f64() * 1e3 / mb,
        if simulated { ", includes the simulator" } else { "" },
    );
}

fn copy_speed(a: &CopySpeedArgs) -> Result<bool> {
    if a.size == 0 || a.size > 1 << 30 {
        bail!("--size {} is out of range (1 byte to 1 GiB)", a.size);
    }
    if !(1..=MAX_ITERS).contains(&a.iters) {
        bail!("--iters {} is out of range (1 to {MAX_ITERS})", a.iters);
    }
    let mut o = open(&a.device, a.size)?;
    let Some(mut dma) = o.dma.take() else { return copy_speed_on_gpu(o.bridge, a) };
    let b = &mut o.bridge;
    let topo = bring_up(b, &Layout::default())?;
    let vram = topo.bar(0).context("the GPU has no BAR0")?.size;
    if a.size as u64 > vram {
        bail!("--size {} is larger than the GPU's BAR0 ({})", a.size, size_name(vram));
    }
    let data = pattern(a.size, 0x5EED);
    let mut back = vec![0u8; a.size];
    let mut copier = Copier::new();
    for _ in 0..a.iters {
        let m = measure(b, |b| copier.copy_in(b, dma.as_mut(), 0, &data))?;
        report("copyin", a.size, &m, o.simulated);
    }
    for _ in 0..a.iters {
        back.fill(0);
        let m = measure(b, |b| copier.copy_out(b, dma.as_mut(), 0, &mut back))?;
        report("copyout", a.size, &m, o.simulated);
    }
    if back != data {
        let at = back.iter().zip(&data).position(|(x, y)| x != y).unwrap_or(0);
        eprintln!("pilot: copy round trip differs at byte {at}");
        return Ok(false);
    }
    println!("round trip of {} bytes verified", a.size);
    Ok(true)
}

/// copy-speed on a real GPU: booted (firmware from `PILOT_AMD_FIRMWARE` or /lib/firmware/amdgpu), its SDMA queue
/// on the GPU side of the copies, into and out of one VRAM buffer.
fn copy_speed_on_gpu(bridge: Bridge, a: &CopySpeedArgs) -> Result<bool> {
    use pilot_amd::{boot::BootOptions, device::AmdDevice};
    use pilot_core::device::{BufferUse, Device};
    let dir = pilot_amd::firmware::firmware_dir();
    let mut dev = AmdDevice::open(bridge, &dir, BootOptions::default())?;
    let buffer = dev.alloc(a.size, BufferUse::Scratch)?;
    let data = pattern(a.size, 0x5EED);
    let mut back = vec![0u8; a.size];
    let timed = |dev: &mut AmdDevice, f: &mut dyn FnMut(&mut AmdDevice) -> Result<()>| -> Result<Measured> {
        let (t0, c0, s0) = (dev.bridge().now(), cpu_time(), dev.bridge().stats());
        f(dev)?;
        let (b, s) = (dev.bridge(), dev.bridge().stats());
        let stats = Stats {
            control_out: s.control_out - s0.control_out,
            control_in: s.control_in - s0.control_in,
            bulk_out: s.bulk_out - s0.bulk_out,
            bulk_in: s.bulk_in - s0.bulk_in,
            bytes_out: s.bytes_out - s0.bytes_out,
            bytes_in: s.bytes_in - s0.bytes_in,
        };
        Ok(Measured { time: b.now() - t0, cpu: cpu_time() - c0, stats })
    };
    for _ in 0..a.iters {
        let m = timed(&mut dev, &mut |d| Ok(d.copy_in(buffer, 0, &data)?))?;
        report("copyin", a.size, &m, false);
    }
    for _ in 0..a.iters {
        back.fill(0);
        let m = timed(&mut dev, &mut |d| Ok(d.copy_out(buffer, 0, &mut back)?))?;
        report("copyout", a.size, &m, false);
    }
    if back != data {
        let at = back.iter().zip(&data).position(|(x, y)| x != y).unwrap_or(0);
        eprintln!("pilot: copy round trip differs at byte {at}");
        return Ok(false);
    }
    println!("round trip of {} bytes verified", a.size);
    Ok(true)
}

fn reset(arg: &DeviceArg) -> Result<bool> {
    let mut o = open(arg, 0)?;
    let b = &mut o.bridge;
    b.set_pcie_power(false)?;
    b.ensure_link()?;
    let link = link_name(b.ltssm()?);
    println!("{}: PCIe power-cycled, link {link}", b.name());
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::parse_usb_name;

    #[test]
    fn names_and_sizes() {
        assert_eq!(parse_usb_name("usb:2-13"), Some((2, 13)));
        assert_eq!(parse_usb_name("usb:2"), None);
        assert_eq!(size_name(512 << 20), "512 MiB");
        assert_eq!(size_name(0x2000), "8 KiB");
        assert_eq!(size_name(32 << 30), "32 GiB");
        assert_eq!(link_name(0x78), "L0 (0x78)");
        assert_eq!(link_name(0x11), "down (LTSSM 0x11)");
    }
}
