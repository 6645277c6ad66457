//! pilot-usb-sim: the bridge simulator (`--device sim`), tests and desktop tools only: an in-process [`Transport`] that
//! behaves as the custom firmware does on the control and bulk level, the PCIe tree and GPU behind it, a stand-in for
//! the GPU's DMA engine, a timing model and fault injection.
//!
//! Gaps against tinygrad's mock that this fills (see tinygrad `test/mockgpu/usb.py`): the 0x822000 read
//! trigger, the E4 length clamp, F0 error/timeout and UR completions, LTSSM and F3, strict routing through the
//! bridge chain, timing, and an ASPM L1 link whose reads return 0xffffffff until the driver disables it. The GPU itself is [`gpu`]: its registers, doorbells, firmware checks and
//! queues. Not modelled: USB2 fallback, XDATA bank 1 (PHY).

mod bridge_fw;
pub mod consts;
mod dma;
pub mod gpu;
mod pcie;
pub mod timing;

use bridge_fw::{BridgeFirmware, TlpFault};
use consts::*;
pub use gpu::board::Board;
pub use gpu::GpuFault;
use pilot_usb_bridge::copy::{CopyInJob, DeviceDma};
use pilot_usb_bridge::error::{Error, Result, TransferError};
use pilot_usb_bridge::proto::Setup;
use pilot_usb_bridge::transport::{Ticket, Transport};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
pub use timing::Timing;

/// How the simulated bridge starts.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// GPU memory behind BAR0: a power of two of at least 1 MB.
    pub vram_bytes: u64,
    /// Whether the firmware powered PCIe at boot (tinygrad says current firmware boots with it off).
    pub pcie_on_at_boot: bool,
    pub timing: Timing,
    /// Which GPU sits behind the bridge.
    pub board: Board,
    /// Where the simulated PSP reads the real firmware it checks staged images against; `None`:
    /// `PILOT_AMD_FIRMWARE`, else `/lib/firmware/amdgpu`.
    pub firmware_dir: Option<PathBuf>,
    /// Seeds every random choice the model makes (which reads an enabled ASPM L1 corrupts, ...): one seed, one run.
    pub seed: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            vram_bytes: 512 << 20,
            pcie_on_at_boot: false,
            timing: Timing::default(),
            board: Board::Navi31,
            firmware_dir: None,
            seed: 0x5EED,
        }
    }
}

/// The host's physical memory in bytes (`MemTotal` of /proc/meminfo), where it can be read.
fn host_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    line.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?.checked_mul(1024)
}

fn firmware_dir(cfg: &SimConfig) -> PathBuf {
    cfg.firmware_dir.clone().unwrap_or_else(|| {
        std::env::var_os("PILOT_AMD_FIRMWARE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/lib/firmware/amdgpu"))
    })
}

/// An injected fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The firmware loses the transaction: a control OUT reports success and has no effect, a bulk OUT is
    /// received and its data lost, an IN waits out its timeout.
    Drop,
    /// The endpoint stalls (a bulk endpoint stays halted until the next open).
    Stall,
    /// The next IN transfer delivers half of what was asked.
    ShortRead,
    /// The transaction times out.
    Timeout,
    /// The device disappears until it is opened again (re-enumerated).
    Unplug,
    /// Every single-TLP completion reports a firmware error until the next open.
    FirmwareError,
    /// Every single TLP never completes (ret_status 0xFF after the firmware's polls) until the next open.
    FirmwareNeverCompletes,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    Out,
    In,
}

/// A served asynchronous bulk OUT: its result, its buffer and when it completes.
type Submitted = (Result<usize, TransferError>, Vec<u8>, Duration);

/// A submitted asynchronous bulk OUT whose data has not started yet.
struct Queued {
    id: u64,
    ep: u8,
    data: Vec<u8>,
    timeout: Duration,
    /// The fault counted for it at submission.
    fault: Result<Option<Fault>, TransferError>,
    submitted: Duration,
}

struct State {
    fw: BridgeFirmware,
    transactions: u64,
    faults: Vec<(u64, Fault)>,
    unplugged: bool,
    halted: [bool; 2],
    next_ticket: u64,
    queued: VecDeque<Queued>,
    done: HashMap<u64, Submitted>,
}

impl State {
    /// Starts (and serves, in submission order) the queued bulk OUTs up to `upto`, or all of them.
    fn start_queued(&mut self, upto: Option<u64>) {
        while self.queued.front().is_some_and(|q| upto.is_none_or(|t| q.id <= t)) {
            let q = self.queued.pop_front().expect("checked");
            let (result, land) = match q.fault {
                Err(e) => (Err(e), self.fw.now),
                Ok(Some(Fault::Timeout)) => (Err(TransferError::Timeout(q.timeout)), q.submitted + q.timeout),
                Ok(Some(Fault::Drop)) => {
                    self.fw.lose_bulk_out(q.data.len());
                    (Ok(q.data.len()), self.fw.now)
                }
                Ok(_) => match self.fw.bulk_out(q.ep, &q.data, q.submitted) {
                    Ok((n, land)) => (Ok(n), land),
                    Err(e) => (Err(e), self.fw.now),
                },
            };
            self.done.insert(q.id, (result, q.data, land));
        }
    }

    /// Counts one transaction and returns the fault that fires on it, if any.
    fn fault(&mut self, dir: Dir, bulk_ep: Option<usize>) -> Result<Option<Fault>, TransferError> {
        let n = self.transactions;
        self.transactions += 1;
        if self.unplugged {
            return Err(TransferError::NoDevice);
        }
        if bulk_ep.is_some_and(|ep| self.halted[ep]) {
            return Err(TransferError::Stall);
        }
        let applies = |f: Fault| f != Fault::ShortRead || dir == Dir::In;
        let Some(i) = self.faults.iter().position(|&(at, f)| at <= n && applies(f)) else { return Ok(None) };
        let (_, fault) = self.faults.remove(i);
        match fault {
            Fault::Unplug => {
                self.unplugged = true;
                Err(TransferError::NoDevice)
            }
            Fault::Stall => {
                if let Some(ep) = bulk_ep {
                    self.halted[ep] = true;
                }
                Err(TransferError::Stall)
            }
            Fault::FirmwareError | Fault::FirmwareNeverCompletes => {
                self.fw.tlp_fault =
                    Some(if fault == Fault::FirmwareError { TlpFault::Error } else { TlpFault::NeverCompletes });
                Ok(None)
            }
            f => Ok(Some(f)),
        }
    }

    fn timed_out(&mut self, timeout: Duration) -> TransferError {
        self.fw.now += timeout;
        TransferError::Timeout(timeout)
    }
}

/// A simulated bridge. Clones share the device; [`Simulator::transport`] opens it.
#[derive(Clone)]
pub struct Simulator(Arc<Mutex<State>>);

/// The most VRAM a simulated board may have (a power of two above the 24 GiB of the largest board).
pub const MAX_VRAM_BYTES: u64 = 32 << 30;

impl Simulator {
    /// A simulator for `cfg`; panics on a VRAM size [`Simulator::try_new`] refuses.
    pub fn new(cfg: SimConfig) -> Simulator {
        assert!(cfg.vram_bytes.is_power_of_two() && cfg.vram_bytes >= 1 << 20, "VRAM must be a power of two >= 1 MB");
        Simulator(Arc::new(Mutex::new(State {
            fw: BridgeFirmware::new(
                cfg.timing,
                cfg.vram_bytes,
                cfg.pcie_on_at_boot,
                cfg.board,
                firmware_dir(&cfg),
                cfg.seed,
            ),
            transactions: 0,
            faults: Vec::new(),
            unplugged: false,
            halted: [false; 2],
            next_ticket: 0,
            queued: VecDeque::new(),
            done: HashMap::new(),
        })))
    }

    /// [`Simulator::new`], refusing with a one-line reason a VRAM size that is not a power of two from 1 MB
    /// to [`MAX_VRAM_BYTES`] or that is more than the host's memory (VRAM is host memory).
    pub fn try_new(cfg: SimConfig) -> std::result::Result<Simulator, String> {
        let v = cfg.vram_bytes;
        if !v.is_power_of_two() || !(1 << 20..=MAX_VRAM_BYTES).contains(&v) {
            return Err(format!("simulated VRAM of {v} bytes is not a power of two from 1 MB to {MAX_VRAM_BYTES}"));
        }
        if let Some(host) = host_memory().filter(|&h| v > h) {
            return Err(format!("simulated VRAM of {v} bytes is more than the host's {host} bytes of memory"));
        }
        Ok(Simulator::new(cfg))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves a model in a consistent-enough state for inspection.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A transport to this bridge (what `--device sim` opens).
    pub fn transport(&self) -> Box<dyn Transport> {
        Box::new(SimTransport { sim: self.clone() })
    }

    /// The stand-in GPU DMA engine behind this bridge.
    pub fn dma(&self) -> SimDma {
        SimDma { sim: self.clone() }
    }

    /// Injects `fault` on the `after`-th transaction from now (0 = the next one).
    pub fn inject(&self, fault: Fault, after: u64) {
        let mut s = self.state();
        let at = s.transactions + after;
        s.faults.push((at, fault));
    }

    /// Modelled time since the simulator started.
    pub fn now(&self) -> Duration {
        self.state().fw.now
    }

    pub fn transactions(&self) -> u64 {
        self.state().transactions
    }

    /// A copy of VRAM `off..off+len` as the host reads it through BAR0 (for checking results from outside): with
    /// the writes HDP still holds ([`gpu::hdp`]).
    pub fn vram(&self, off: usize, len: usize) -> Vec<u8> {
        let s = self.state();
        let mut out = s.fw.pcie.vram[off..off + len].to_vec();
        s.fw.hdp.overlay(off, &mut out);
        out
    }

    /// A copy of VRAM `off..off+len` as the GPU's engines read it: without the host writes HDP still holds.
    pub fn vram_gpu_view(&self, off: usize, len: usize) -> Vec<u8> {
        self.state().fw.pcie.vram[off..off + len].to_vec()
    }

    pub fn link_up(&self) -> bool {
        self.state().fw.link_up()
    }

    /// Whether the GPU endpoint's Link Control still enables ASPM L1 (reads through the link are flaky then).
    pub fn aspm_l1(&self) -> bool {
        self.state().fw.pcie.gpu_aspm_l1()
    }

    /// Every fault the GPU's engines recorded (a queue that stopped, a PSP or SMU command refused), oldest
    /// first: what a driver's timeout can name.
    pub fn gpu_faults(&self) -> Vec<GpuFault> {
        self.state().fw.with_gpu(|g, _| g.faults().to_vec())
    }

    /// Dispatches and wave instructions the emulator ran for the simulated GPU.
    pub fn gpu_dispatched(&self) -> gpu::Dispatched {
        self.state().fw.with_gpu(|g, _| g.dispatched())
    }
}

struct SimTransport {
    sim: Simulator,
}

impl Transport for SimTransport {
    fn name(&self) -> &str {
        "sim"
    }

    fn product(&self) -> &str {
        PRODUCT
    }

    fn claim(&mut self) -> Result<(), TransferError> {
        let mut s = self.sim.state();
        // Opening again models a replugged, re-enumerated device; transfers still queued are cancelled.
        while let Some(q) = s.queued.pop_front() {
            let now = s.fw.now;
            s.done.insert(q.id, (Err(TransferError::Other("cancelled by a new open".into())), q.data, now));
        }
        s.unplugged = false;
        s.halted = [false; 2];
        s.fw.control_out(Setup { request_type: 0, request: REQ_SET_CONFIGURATION, value: 1, index: 0 }, &[])
    }

    fn control_in(&mut self, setup: Setup, buf: &mut [u8], timeout: Duration) -> Result<usize, TransferError> {
        let mut s = self.sim.state();
        match s.fault(Dir::In, None)? {
            Some(Fault::Timeout | Fault::Drop) => Err(s.timed_out(timeout)),
            Some(Fault::ShortRead) => {
                let n = s.fw.control_in(setup, buf)?;
                Ok(n / 2)
            }
            _ => s.fw.control_in(setup, buf),
        }
    }

    fn control_out(&mut self, setup: Setup, data: &[u8], timeout: Duration) -> Result<(), TransferError> {
        let mut s = self.sim.state();
        match s.fault(Dir::Out, None)? {
            Some(Fault::Timeout) => Err(s.timed_out(timeout)),
            Some(Fault::Drop) => {
                let control = s.fw.timing.control;
                s.fw.now += control;
                Ok(())
            }
            _ => s.fw.control_out(setup, data),
        }
    }

    fn bulk_in(&mut self, ep: u8, buf: &mut [u8], timeout: Duration) -> Result<usize, TransferError> {
        let mut s = self.sim.state();
        match s.fault(Dir::In, Some(1))? {
            Some(Fault::Timeout | Fault::Drop) => Err(s.timed_out(timeout)),
            Some(Fault::ShortRead) => {
                let n = s.fw.bulk_in(ep, buf, timeout)?;
                Ok(n / 2)
            }
            _ => s.fw.bulk_in(ep, buf, timeout),
        }
    }

    fn bulk_out(&mut self, ep: u8, data: &[u8], timeout: Duration) -> Result<usize, TransferError> {
        let mut s = self.sim.state();
        // Transfers on one endpoint start in submission order.
        s.start_queued(None);
        let (n, land) = match s.fault(Dir::Out, Some(0))? {
            Some(Fault::Timeout) => return Err(s.timed_out(timeout)),
            Some(Fault::Drop) => {
                s.fw.lose_bulk_out(data.len());
                (data.len(), s.fw.now)
            }
            _ => {
                let now = s.fw.now;
                s.fw.bulk_out(ep, data, now)?
            }
        };
        s.fw.now = s.fw.now.max(land);
        Ok(n)
    }

    /// The transfer is queued, not served: the host stack hands it to the bus at some time before its reap (a
    /// libusb worker, an xHCI ring), so its data may start after control transfers sent later, and the bridge's
    /// 0xF2 engine takes the arm it finds when data starts (tinygrad `ops_amd.py` `AMDAllocator._copyin` hands chunk
    /// k to libusb before it arms chunk k+1). The model takes the latest start a host may see: at the reap, or
    /// before the next bulk transfer on the same endpoint. Its modelled transfer time still runs from submission.
    fn submit_bulk_out(&mut self, ep: u8, data: Vec<u8>, timeout: Duration) -> Result<Ticket, TransferError> {
        let mut s = self.sim.state();
        let fault = s.fault(Dir::Out, Some(0));
        let id = s.next_ticket;
        s.next_ticket += 1;
        let submitted = s.fw.now;
        s.queued.push_back(Queued { id, ep, data, timeout, fault, submitted });
        Ok(Ticket(id))
    }

    fn reap(&mut self, ticket: Ticket) -> Result<(usize, Vec<u8>), TransferError> {
        let mut s = self.sim.state();
        s.start_queued(Some(ticket.0));
        let Some((result, buf, done)) = s.done.remove(&ticket.0) else {
            return Err(TransferError::Other(format!("unknown transfer {}", ticket.0)));
        };
        s.fw.now = s.fw.now.max(done);
        result.map(|n| (n, buf))
    }

    fn now(&self) -> Duration {
        self.sim.state().fw.now
    }

    fn sleep(&mut self, d: Duration) {
        self.sim.state().fw.now += d;
    }
}

/// The simulator's stand-in for the GPU side of the big copies.
pub struct SimDma {
    sim: Simulator,
}

impl DeviceDma for SimDma {
    fn queue_copy_in(&mut self, job: &CopyInJob) -> Result<()> {
        let mut s = self.sim.state();
        let end = job.dest as usize + job.len;
        if end > s.fw.pcie.vram.len() {
            return Err(dma_err(format!("copy-in to 0x{:x}+{} is outside VRAM", job.dest, job.len)));
        }
        s.fw.dma.queue_copy_in(*job);
        // Chunks already in place (none, unless the host staged ahead) are consumed at once.
        let now = s.fw.now;
        let mut dma = std::mem::take(&mut s.fw.dma);
        dma.poll(&mut s.fw, now);
        s.fw.dma = dma;
        Ok(())
    }

    fn queue_copy_out(&mut self, src: u64, len: usize) -> Result<()> {
        let mut s = self.sim.state();
        let mut dma = std::mem::take(&mut s.fw.dma);
        let ok = dma.copy_out(&mut s.fw, src, len);
        s.fw.dma = dma;
        if !ok {
            return Err(dma_err(format!("copy-out from 0x{src:x}+{len} is outside VRAM")));
        }
        Ok(())
    }
}

fn dma_err(msg: String) -> Error {
    Error::Invalid { device: "sim".into(), op: "GPU DMA".into(), msg }
}
