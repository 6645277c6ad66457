//! The simulator's cost model: what each USB transaction would take on the real bridge.
//!
//! Bandwidths come from the firmware's README (tinygrad/asm2464pd-firmware): F0 streaming ~3.6 MB/s write and
//! ~1.8 MB/s read (one TLP per dword), the 0xF2 SRAM engine ~700 MB/s, on a 10 Gbps USB3 link. The
//! per-transaction latencies are assumptions (no source measures them; 100-200 us per control transfer is the
//! range we reason with), as are the GPU-side copy rate and the firmware's TLP-timeout time.
//!
//! The GPU's own costs are assumptions too, chosen from public specifications of an RX 7900 XTX, not measured:
//! a PM4 or SDMA packet takes `pm4_packet`/`sdma_packet` to parse; an SDMA copy inside VRAM runs at
//! `vram_copy` bytes per second (half the 960 GB/s peak, read plus write); a copy touching the bridge runs at
//! `gpu_dma`; a dispatch costs `dispatch_launch` plus its emulated wave instructions at
//! `cycles_per_wave_instruction` cycles each on `shader_clock`, spread evenly over two SIMDs per CU (an optimistic
//! throughput bound: no memory stalls, perfect occupancy). PSP and SMU commands take no modelled time.

use std::time::Duration;

#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// A control transfer, setup to status, including the firmware's handling.
    pub control: Duration,
    /// Fixed cost of one bulk transfer on top of its bytes.
    pub bulk: Duration,
    /// USB 3.2 Gen 2 (10 Gbps, 128b/132b), bytes per second.
    pub link: f64,
    pub sram: f64,
    pub f0_write: f64,
    pub f0_read: f64,
    /// The GPU reading or writing the bridge's SRAM across PCIe (assumption).
    pub gpu_dma: f64,
    /// Link training after F3 power-on (the firmware polls up to ~2 s; assumption).
    pub power_on: Duration,
    /// The firmware's ~500k completion polls before it reports a TLP timeout (assumption).
    pub tlp_timeout: Duration,
    pub pm4_packet: Duration,
    pub sdma_packet: Duration,
    pub vram_copy: f64,
    pub dispatch_launch: Duration,
    pub shader_clock: f64,
    pub cycles_per_wave_instruction: f64,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            control: Duration::from_micros(150),
            bulk: Duration::from_micros(30),
            link: 10e9 / 8.0 * 128.0 / 132.0,
            sram: 700e6,
            f0_write: 3.6e6,
            f0_read: 1.8e6,
            gpu_dma: 4e9,
            power_on: Duration::from_millis(100),
            tlp_timeout: Duration::from_millis(500),
            pm4_packet: Duration::from_nanos(200),
            sdma_packet: Duration::from_nanos(200),
            vram_copy: 480e9,
            dispatch_launch: Duration::from_micros(5),
            shader_clock: 2.5e9,
            cycles_per_wave_instruction: 4.0,
        }
    }
}

impl Timing {
    /// `bytes` over USB through an engine of `rate` bytes per second (capped by the link).
    pub fn usb(&self, bytes: usize, rate: f64) -> Duration {
        Duration::from_secs_f64(bytes as f64 / rate.min(self.link))
    }

    /// `bytes` moved by the GPU across PCIe.
    pub fn gpu(&self, bytes: usize) -> Duration {
        Duration::from_secs_f64(bytes as f64 / self.gpu_dma)
    }

    /// `bytes` copied by the GPU inside VRAM.
    pub fn vram(&self, bytes: usize) -> Duration {
        Duration::from_secs_f64(bytes as f64 / self.vram_copy)
    }

    /// A dispatch of `wave_instructions` on `cus` compute units.
    pub fn dispatch(&self, wave_instructions: u64, cus: u32) -> Duration {
        let simds = f64::from(cus.max(1) * 2);
        let cycles = wave_instructions as f64 * self.cycles_per_wave_instruction / simds;
        self.dispatch_launch + Duration::from_secs_f64(cycles / self.shader_clock)
    }
}
