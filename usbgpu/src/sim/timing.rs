//! The simulator's cost model: what each USB transaction would take on the real bridge.
//!
//! Bandwidths come from the firmware's README (tinygrad/asm2464pd-firmware): F0 streaming ~3.6 MB/s write and
//! ~1.8 MB/s read (one TLP per dword), the 0xF2 SRAM engine ~700 MB/s, on a 10 Gbps USB3 link. The
//! per-transaction latencies are assumptions (no source measures them; 100-200 us per control transfer is the
//! range we reason with), as are the GPU-side copy rate and the firmware's TLP-timeout time.

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
}
