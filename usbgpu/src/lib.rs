//! pilot-usbgpu: AMD GPUs behind the ASM2464PD USB-to-PCIe bridge running tinygrad's custom firmware.
//!
//! Layers, bottom up:
//! - [`proto`]: the firmware's wire protocol as data and pure encoders.
//! - [`transport`]: the seam (control in/out, bulk in/out, async bulk OUT); [`usb`] implements it over libusb
//!   (cargo feature `usb`), [`sim`] in process (cargo feature `sim`, never in the lean runtime).
//! - [`bridge`]: the bridge driver (open, link, XDATA, TLPs, streaming MMIO, SRAM), with [`lock`].
//! - [`pcie`]: bring-up of the bridge chain and the GPU's BARs.
//! - [`rdna3`]: an RDNA3 (gfx11) emulator for the simulated GPU (cargo feature `emu`).
//! - [`copy`]: the pipelined big copies through SRAM, with the GPU side behind [`copy::DeviceDma`].
//! - [`codeobj`]: HSA code objects (gfx1100, gfx1201) read and checked, reduced to what a dispatch needs.
//! - [`firmware`]: the AMD firmware files each card needs, their headers checked, and the PSP load order.
//! - [`amd`]: the AMD GPU itself: bring-up, queues and the prebuilt step, through [`amd::bus::GpuBus`].
//! - [`emu_device`]: a `Device` that runs `usb+amd` gfx1100 artifacts on [`rdna3`] (cargo feature `emu`).

pub mod amd;
pub mod bridge;
pub mod codeobj;
pub mod copy;
#[cfg(feature = "emu")]
pub mod emu_device;
pub mod error;
pub mod firmware;
pub mod lock;
pub mod pcie;
pub mod proto;
#[cfg(feature = "emu")]
pub mod rdna3;
#[cfg(feature = "sim")]
pub mod sim;
pub mod transport;
#[cfg(feature = "usb")]
pub mod usb;

pub use bridge::{Bridge, Stats};
pub use error::{Error, Result, TransferError};
pub use transport::Transport;
