//! pilot-amd: the AMD GPU behind the USB bridge (`pilot-usb-bridge`), driven from userspace the way tinygrad's "AM" driver does
//! (tinygrad `runtime/support/am/amdev.py`, `ip.py`; `runtime/ops_amd.py`), with `GMMU=0`.
//!
//! - [`bus`]: the seam every layer above talks through (registers, VRAM, doorbells), over the bridge.
//! - [`bridge_bus`]: that seam over the bridge and the BARs PCIe bring-up assigned.
//! - [`regs`], [`discovery`], [`boot`]: the registers as data, the IP discovery table, and the bring-up.
//! - [`firmware`]: the firmware files each card needs, their headers checked, and the PSP load order.
//! - [`pm4`], [`sdma`]: the packets of the compute and copy queues.
//! - [`mqd`], [`queue`]: the compute HQD and the SDMA queue; [`dma`]: the big copies on SDMA.
//! - [`step`]: the prebuilt step; [`stage`]: small copy-ins carried by the next submission; [`scratch`]: the scratch region's size; [`device`]: the `usb+amd` device.

pub mod boot;
pub mod bridge_bus;
pub mod bus;
pub mod device;
pub mod discovery;
pub mod dma;
pub mod firmware;
pub mod mqd;
pub mod pm4;
pub mod queue;
pub mod regs;
pub mod scratch;
pub mod sdma;
pub mod stage;
pub mod step;
