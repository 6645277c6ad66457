//! [`GpuBus`]: how the driver reaches the GPU. Registers are BAR5 dwords, VRAM is BAR0 (large BAR: the VRAM
//! physical address is the BAR0 offset), doorbells are BAR2 64-bit slots. The bridge implementation turns
//! each call into PCIe TLPs; tests may implement it over a register model directly.

use pilot_usb_bridge::error::Result;

/// Access to one GPU's BARs. Register indices are dword indices into BAR5 (byte offset = index × 4), as the
/// Linux `amdgpu` headers and tinygrad's `regs.py` number them after adding the IP's base segment.
pub trait GpuBus {
    /// Reads the register at dword index `reg`.
    fn read_reg(&mut self, reg: u32) -> Result<u32>;
    /// Writes the register at dword index `reg`.
    fn write_reg(&mut self, reg: u32, value: u32) -> Result<()>;
    /// Reads `buf.len()` bytes of VRAM at physical address `addr`.
    fn read_vram(&mut self, addr: u64, buf: &mut [u8]) -> Result<()>;
    /// Writes `data` to VRAM at physical address `addr`.
    fn write_vram(&mut self, addr: u64, data: &[u8]) -> Result<()>;
    /// Rings the 64-bit doorbell at slot `index` (byte offset = index × 8 in BAR2) with `value`.
    fn ring_doorbell(&mut self, index: u32, value: u64) -> Result<()>;
    /// Writes `data` (at most 512 KB) into the bridge's SRAM staging window, which the GPU reaches as system
    /// memory over PCIe (the PSP's msg1 buffer on USB: tinygrad `AM_PSP.init_sw`), and returns the window's
    /// bus address as the GPU sees it.
    fn write_staging(&mut self, data: &[u8]) -> Result<u64>;
    /// Waits `d` (a real sleep on hardware, simulated time in the simulator).
    fn sleep(&mut self, d: std::time::Duration);
    /// Names the register pair that reaches registers past the BAR5 window (`BIF_BX_PF0_RSMU_INDEX`/`_DATA`,
    /// dword addresses), as soon as discovery has given NBIO's bases (tinygrad `AMDev.indirect_rreg`). Buses that
    /// reach every register directly ignore it.
    fn set_indirect_pair(&mut self, index: u32, data: u32) {
        let _ = (index, data);
    }
    /// Sets or clears the GPU's PCI bus-master bit (COMMAND bit 2 of 4:0.0), which the mode-1 reset clears
    /// while the SMU resets the chip (tinygrad `AMDev.__init__`). A bus that cannot reach config space says so.
    fn set_bus_master(&mut self, enable: bool) -> Result<()> {
        let _ = enable;
        Err(pilot_usb_bridge::error::Error::Invalid {
            device: "GPU".into(),
            op: "bus master".into(),
            msg: "this bus cannot change the GPU's PCI bus-master bit".into(),
        })
    }
}
