//! pilot-usbgpu: AMD GPUs behind the ASM2464 USB-to-PCIe bridge, and their simulator.
//!
//! Not built yet: this crate is a member of the workspace so the dependency rule (never on the
//! compiler, never on protobuf) is enforced from the start.
