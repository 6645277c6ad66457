//! The simulated firmware's own tables, written from the firmware's side (tinygrad/asm2464pd-firmware
//! `handmade/src/main.c`, `pcie_pio.h`; tinygrad `test/mockgpu/usb.py`). Deliberately independent of
//! `pilot_usb_bridge::proto`: the simulator decodes what the driver encodes, so a wrong driver constant fails a test.

pub const RT_VENDOR_OUT: u8 = 0x40;
pub const RT_VENDOR_IN: u8 = 0xC0;
/// Standard requests the firmware reacts to.
pub const RT_STANDARD_OUT_DEVICE: u8 = 0x00;
pub const REQ_SET_CONFIGURATION: u8 = 0x09;

pub const REQ_E4_READ: u8 = 0xE4;
pub const REQ_E5_WRITE: u8 = 0xE5;
pub const REQ_F0_TLP: u8 = 0xF0;
pub const REQ_F2_SRAM: u8 = 0xF2;
pub const REQ_F3_POWER: u8 = 0xF3;

pub const EP_DATA_OUT: u8 = 0x02;
pub const EP_DATA_IN: u8 = 0x81;

pub const PRODUCT: &str = "custom sim";
pub const XDATA_BYTES: usize = 0x1_0000;
/// E4 replies are clamped to this on SuperSpeed (64 on USB2, which is not simulated).
pub const E4_MAX_SS: usize = 512;
pub const REG_LTSSM: usize = 0xB450;
pub const LTSSM_L0: u8 = 0x78;
/// What LTSSM reads while the link is down. Unknown on the real chip (any non-L0 value means "down").
pub const LTSSM_DOWN: u8 = 0x00;

/// F0: wIndex bits [1:0]; the F0 OUT data stage is 12 bytes.
pub const F0_SINGLE: u16 = 0;
pub const F0_STREAM_WRITE: u16 = 1;
pub const F0_STREAM_READ: u16 = 2;
pub const F0_OUT_LEN: usize = 12;
pub const F0_IN_LEN: usize = 8;

/// TLP fmt/type bytes the firmware's engine is given (PCIe base spec fmt[2:0] type[4:0]).
pub const TLP_MRD64: u8 = 0x20;
pub const TLP_MWR64: u8 = 0x60;
pub const TLP_CFGRD0: u8 = 0x04;
pub const TLP_CFGRD1: u8 = 0x05;
pub const TLP_CFGWR0: u8 = 0x44;
pub const TLP_CFGWR1: u8 = 0x45;

/// Completion status field values (completion header bits [15:13]).
pub const CPL_SC: u8 = 0;
pub const CPL_UR: u8 = 1;
/// F0 IN byte 7.
pub const RET_OK: u8 = 0;
pub const RET_ERROR: u8 = 1;
pub const RET_TIMEOUT: u8 = 0xFF;

/// F2: wValue bit 15 = SRAM to host; bits [14:0] = 512-byte sectors; wIndex = start slot | slots << 8.
pub const F2_TO_HOST: u16 = 1 << 15;
pub const F2_SECTOR: usize = 512;
pub const F2_SLOT: usize = 16 * 1024;
pub const SRAM_BYTES: usize = 512 * 1024;
pub const SRAM_BUS: u64 = 0x0020_0000;

/// Bridge windows that alias XDATA, as (XDATA base, bus address, size).
pub const XDATA_WINDOWS: [(usize, u64, usize); 3] = [
    (0xA000, 0x0082_0000, 0x1000), // sys_buf (the copy-in fence lives at +0x800)
    (0xB800, 0x0082_2000, 0x1000), // cq_buf: device-side writes here release an armed SRAM read
    (0xB000, 0x0080_0000, 0x0200),
];
pub const TRIGGER_BUS: u64 = 0x0082_2000;
pub const TRIGGER_BYTES: u64 = 0x1000;

/// The simulated PCIe tree: four bridges on buses 0..3 (device 0 function 0), the GPU at 4:00.0.
/// The ASM2461 ports' device ids are not in the sources; 0x2461 is a stand-in.
pub const BRIDGE_IDS: [(u16, u16); 4] = [(0x1B21, 0x2461), (0x1B21, 0x2461), (0x1002, 0x1478), (0x1002, 0x1479)];
pub const GPU_BUS: u8 = 4;
/// Navi31 (RX 7900 XTX).
pub const GPU_ID: (u16, u16) = (0x1002, 0x744C);
pub const CLASS_BRIDGE: u32 = 0x06_04_00;
pub const CLASS_DISPLAY: u32 = 0x03_00_00;

/// Config-space offsets the model gives behaviour to.
pub const CFG_COMMAND: usize = 0x04;
pub const CFG_BAR0: usize = 0x10;
pub const CFG_BUSES: usize = 0x18;
pub const CFG_MEM_BASE: usize = 0x20;
pub const CFG_PREF_BASE: usize = 0x24;
pub const CFG_PREF_BASE_HI: usize = 0x28;
pub const CFG_PREF_LIMIT_HI: usize = 0x2C;
pub const CFG_EXT_CAP: usize = 0x100;
pub const CMD_MEM: u8 = 1 << 1;
pub const EXT_CAP_ID_REBAR: u32 = 0x15;

/// GPU BARs as (index, size, low flag bits): BAR0 VRAM (64-bit prefetchable; resizable), BAR2 doorbells
/// (64-bit prefetchable), BAR4 I/O, BAR5 registers (32-bit), after tinygrad's mock `_gpu_bars`.
pub const BAR_VRAM: usize = 0;
pub const BAR_DOORBELL: usize = 2;
pub const BAR_IO: usize = 4;
pub const BAR_MMIO: usize = 5;
pub const BAR_FLAGS_64_PREF: u32 = 0x0C;
pub const BAR_FLAGS_IO: u32 = 0x01;
pub const DOORBELL_BYTES: u64 = 0x2000;
pub const MMIO_BYTES: u64 = 2 << 20;
pub const IO_BYTES: u64 = 0x100;
/// BAR0's size out of reset, before a resize.
pub const BAR0_DEFAULT_BYTES: u64 = 256 << 20;

/// The GPU's (legacy) capability list, as `lspci -v` lists it for a Navi 3x function: vendor specific at 0x48,
/// power management at 0x50, PCI Express at 0x64, MSI at 0xA0. (The offsets are the model's; the driver must walk.)
pub const CFG_STATUS: usize = 0x06;
pub const STATUS_CAP_LIST: u8 = 1 << 4;
pub const CFG_CAP_PTR: usize = 0x34;
pub const CAP_LIST: [(usize, u8); 4] = [(0x48, 0x09), (0x50, 0x01), (0x64, 0x10), (0xA0, 0x05)];
pub const CAP_ID_PCIE: u8 = 0x10;
/// PCIe capability + 0x10: Link Control; bits [1:0] ASPM control (bit 0 L0s, bit 1 L1).
pub const PCIE_LNKCTL: usize = 0x10;
pub const LNKCTL_ASPM_MASK: u8 = 0x03;
pub const LNKCTL_ASPM_L1: u8 = 0x02;
/// Link Control out of power-on: ASPM L1 enabled, read completion boundary 128 B (bit 3) — tinygrad
/// `AMDev._disable_aspm`: "power on defaults it enabled".
pub const LNKCTL_POWER_ON: u8 = LNKCTL_ASPM_L1 | 1 << 3;
