//! pilot-usb-bridge: the ASM2464PD USB-to-PCIe bridge running tinygrad's custom firmware, and the PCIe
//! device behind it. What is behind the bridge (the AMD GPU) is `pilot-amd`; a simulated bridge is
//! `pilot-usb-sim`.
//!
//! Layers, bottom up:
//! - [`proto`]: the firmware's wire protocol as data and pure encoders.
//! - [`transport`]: the seam (control in/out, bulk in/out, async bulk OUT); [`usb`] implements it over libusb
//!   (cargo feature `usb`), the simulator in process.
//! - [`bridge`]: the bridge driver (open, link, XDATA, TLPs, streaming MMIO, SRAM), with [`lock`].
//! - [`pcie`]: bring-up of the bridge chain and the GPU's BARs.
//! - [`copy`]: the pipelined big copies through SRAM, with the GPU side behind [`copy::DeviceDma`].

pub mod bridge;
pub mod copy;
pub mod error;
pub mod lock;
pub mod pcie;
pub mod proto;
pub mod transport;
#[cfg(feature = "usb")]
pub mod usb;

pub use bridge::{Bridge, Stats};
pub use error::{Error, Result, TransferError};
pub use transport::Transport;
