//! The 64-byte kernel descriptor (`NAME.kd`) of code object V4-V6 for GFX11 and GFX12, decoded into
//! named fields, and the check that every bit set is one pilot's dispatch accounts for.
//!
//! Layout and bit fields: LLVM `llvm/include/llvm/Support/AMDHSAKernelDescriptor.h`
//! (`kernel_descriptor_t`, `COMPUTE_PGM_RSRC1/2/3`, `KERNEL_CODE_PROPERTY`) and the "Kernel Descriptor"
//! tables of LLVM's AMDGPUUsage.

use std::mem::offset_of;

use pilot_core::Arch;
use zerocopy::little_endian::{I64, U16, U32};
use zerocopy::{FromBytes, Immutable, KnownLayout, Unaligned};

use super::Refusal;

/// Size of a descriptor in bytes.
pub const SIZE: usize = 64;

/// The descriptor's fields, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptor {
    /// LDS bytes per work-group (static allocation).
    pub group_segment_fixed_size: u32,
    /// Scratch bytes per work-item.
    pub private_segment_fixed_size: u32,
    pub kernarg_size: u32,
    /// From the descriptor's own address to the first instruction.
    pub kernel_code_entry_byte_offset: i64,
    pub compute_pgm_rsrc3: u32,
    pub compute_pgm_rsrc1: u32,
    pub compute_pgm_rsrc2: u32,
    pub kernel_code_properties: u16,
    pub kernarg_preload: u16,
}

/// A bit field: `(shift, width)`.
type Field = (u32, u32);

pub mod rsrc1 {
    use super::Field;
    pub const GRANULATED_WORKITEM_VGPR_COUNT: Field = (0, 6);
    /// Ignored by GFX10+ hardware (always 128 SGPRs); LLVM 19 still writes a value here (LLVM PR
    /// 154666 later made it 0), so it is read but never used.
    pub const GRANULATED_WAVEFRONT_SGPR_COUNT: Field = (6, 4);
    pub const PRIORITY: Field = (10, 2);
    pub const FLOAT_ROUND_MODE_32: Field = (12, 2);
    pub const FLOAT_ROUND_MODE_16_64: Field = (14, 2);
    pub const FLOAT_DENORM_MODE_32: Field = (16, 2);
    pub const FLOAT_DENORM_MODE_16_64: Field = (18, 2);
    pub const PRIV: Field = (20, 1);
    /// ENABLE_DX10_CLAMP on GFX11, ENABLE_WG_RR_EN on GFX12.
    pub const BIT21: Field = (21, 1);
    pub const DEBUG_MODE: Field = (22, 1);
    /// ENABLE_IEEE_MODE on GFX11, DISABLE_PERF on GFX12.
    pub const BIT23: Field = (23, 1);
    pub const BULKY: Field = (24, 1);
    pub const CDBG_USER: Field = (25, 1);
    pub const FP16_OVFL: Field = (26, 1);
    pub const RESERVED: Field = (27, 2);
    pub const WGP_MODE: Field = (29, 1);
    pub const MEM_ORDERED: Field = (30, 1);
    pub const FWD_PROGRESS: Field = (31, 1);
}

pub mod rsrc2 {
    use super::Field;
    pub const ENABLE_PRIVATE_SEGMENT: Field = (0, 1);
    pub const USER_SGPR_COUNT: Field = (1, 5);
    /// ENABLE_TRAP_HANDLER on GFX11, ENABLE_DYNAMIC_VGPR on GFX12.
    pub const BIT6: Field = (6, 1);
    pub const ENABLE_SGPR_WORKGROUP_ID_X: Field = (7, 1);
    pub const ENABLE_SGPR_WORKGROUP_ID_Y: Field = (8, 1);
    pub const ENABLE_SGPR_WORKGROUP_ID_Z: Field = (9, 1);
    pub const ENABLE_SGPR_WORKGROUP_INFO: Field = (10, 1);
    /// 0: X, 1: X and Y, 2: X, Y and Z (in v0, packed 10 bits each on GFX11+).
    pub const ENABLE_VGPR_WORKITEM_ID: Field = (11, 2);
    pub const ENABLE_EXCEPTION_ADDRESS_WATCH: Field = (13, 1);
    pub const ENABLE_EXCEPTION_MEMORY: Field = (14, 1);
    /// Filled in by whoever dispatches (from `group_segment_fixed_size`); 0 in the descriptor.
    pub const GRANULATED_LDS_SIZE: Field = (15, 9);
    /// The seven ENABLE_EXCEPTION_* floating-point and integer-divide traps.
    pub const FP_EXCEPTIONS: Field = (24, 7);
    /// Reserved on GFX11, WGP_TAKEOVER on GFX12.
    pub const BIT31: Field = (31, 1);
}

pub mod rsrc3 {
    use super::Field;
    /// SHARED_VGPR_COUNT on GFX11 (wave64 only), reserved on GFX12.
    pub const LOW4: Field = (0, 4);
    pub const GFX11_INST_PREF_SIZE: Field = (4, 6);
    pub const GFX11_TRAP_ON_START: Field = (10, 1);
    pub const GFX11_TRAP_ON_END: Field = (11, 1);
    pub const GFX12_INST_PREF_SIZE: Field = (4, 8);
    pub const RESERVED12: Field = (12, 1);
    /// Reserved on GFX11, GLG_EN on GFX12.
    pub const BIT13: Field = (13, 1);
    pub const RESERVED: Field = (14, 17);
    pub const IMAGE_OP: Field = (31, 1);
}

pub mod props {
    use super::Field;
    pub const ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER: Field = (0, 1);
    pub const ENABLE_SGPR_DISPATCH_PTR: Field = (1, 1);
    pub const ENABLE_SGPR_QUEUE_PTR: Field = (2, 1);
    pub const ENABLE_SGPR_KERNARG_SEGMENT_PTR: Field = (3, 1);
    pub const ENABLE_SGPR_DISPATCH_ID: Field = (4, 1);
    pub const ENABLE_SGPR_FLAT_SCRATCH_INIT: Field = (5, 1);
    pub const ENABLE_SGPR_PRIVATE_SEGMENT_SIZE: Field = (6, 1);
    pub const RESERVED0: Field = (7, 3);
    pub const ENABLE_WAVEFRONT_SIZE32: Field = (10, 1);
    pub const USES_DYNAMIC_STACK: Field = (11, 1);
    pub const RESERVED1: Field = (12, 4);
}

/// The value of field `f` in `word`.
pub fn get(word: u32, f: Field) -> u32 {
    (word >> f.0) & (((1u64 << f.1) - 1) as u32)
}

fn refuse(field: impl Into<String>, msg: impl Into<String>) -> Refusal {
    Refusal { field: field.into(), msg: msg.into() }
}

/// `kernel_descriptor_t` as it lies in the code object: little-endian, no alignment assumed.
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Raw {
    group_segment_fixed_size: U32,
    private_segment_fixed_size: U32,
    kernarg_size: U32,
    reserved0: [u8; 4],
    kernel_code_entry_byte_offset: I64,
    reserved1: [u8; 20],
    compute_pgm_rsrc3: U32,
    compute_pgm_rsrc1: U32,
    compute_pgm_rsrc2: U32,
    kernel_code_properties: U16,
    kernarg_preload: U16,
    reserved3: [u8; 4],
}

const _: () = assert!(size_of::<Raw>() == SIZE);

impl Descriptor {
    /// Decodes 64 bytes; the reserved bytes must be zero.
    pub fn parse(b: &[u8; SIZE]) -> Result<Descriptor, Refusal> {
        let raw = Raw::ref_from_bytes(b).expect("Raw is SIZE bytes, unaligned");
        let reserved: [(&str, usize, &[u8]); 3] = [
            ("reserved0", offset_of!(Raw, reserved0), &raw.reserved0),
            ("reserved1", offset_of!(Raw, reserved1), &raw.reserved1),
            ("reserved3", offset_of!(Raw, reserved3), &raw.reserved3),
        ];
        for (name, at, bytes) in reserved {
            if bytes.iter().any(|&x| x != 0) {
                let range = at..at + bytes.len();
                return Err(refuse(format!("descriptor.{name}"), format!("bytes {range:?} must be zero")));
            }
        }
        Ok(Descriptor {
            group_segment_fixed_size: raw.group_segment_fixed_size.get(),
            private_segment_fixed_size: raw.private_segment_fixed_size.get(),
            kernarg_size: raw.kernarg_size.get(),
            kernel_code_entry_byte_offset: raw.kernel_code_entry_byte_offset.get(),
            compute_pgm_rsrc3: raw.compute_pgm_rsrc3.get(),
            compute_pgm_rsrc1: raw.compute_pgm_rsrc1.get(),
            compute_pgm_rsrc2: raw.compute_pgm_rsrc2.get(),
            kernel_code_properties: raw.kernel_code_properties.get(),
            kernarg_preload: raw.kernarg_preload.get(),
        })
    }

    /// Refuses anything pilot's dispatch does not set up: traps and exceptions, debug and priority
    /// modes, user SGPRs other than the kernarg pointer, wave64, a dynamic stack, preloaded kernargs,
    /// a pre-filled LDS size, and reserved bits.
    pub fn check(&self, arch: Arch) -> Result<(), Refusal> {
        let gfx12 = arch == Arch::Gfx1201;
        let must = |word: u32, name: &str, f: Field, want: u32, why: &str| -> Result<(), Refusal> {
            match get(word, f) {
                v if v == want => Ok(()),
                v => Err(refuse(name.to_string(), format!("is {v}, pilot needs {want}: {why}"))),
            }
        };
        let p = u32::from(self.kernel_code_properties);
        let prop = |name: &str, f: Field, want: u32, why: &str| {
            must(p, &format!("kernel_code_properties.{name}"), f, want, why)
        };
        prop("enable_wavefront_size32", props::ENABLE_WAVEFRONT_SIZE32, 1, "pilot dispatches wave32")?;
        prop("uses_dynamic_stack", props::USES_DYNAMIC_STACK, 0, "scratch is sized at compile time")?;
        for (name, f) in [
            ("enable_sgpr_private_segment_buffer", props::ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER),
            ("enable_sgpr_dispatch_ptr", props::ENABLE_SGPR_DISPATCH_PTR),
            ("enable_sgpr_queue_ptr", props::ENABLE_SGPR_QUEUE_PTR),
            ("enable_sgpr_dispatch_id", props::ENABLE_SGPR_DISPATCH_ID),
            ("enable_sgpr_flat_scratch_init", props::ENABLE_SGPR_FLAT_SCRATCH_INIT),
            ("enable_sgpr_private_segment_size", props::ENABLE_SGPR_PRIVATE_SEGMENT_SIZE),
        ] {
            prop(name, f, 0, "pilot fills only the kernarg pointer")?;
        }
        prop("reserved0", props::RESERVED0, 0, "reserved")?;
        prop("reserved1", props::RESERVED1, 0, "reserved")?;
        if self.kernarg_preload != 0 {
            return Err(refuse("kernarg_preload", "is set: pilot does not preload kernargs into SGPRs"));
        }

        let r1 = |name: &str, f: Field, why: &str| {
            must(self.compute_pgm_rsrc1, &format!("compute_pgm_rsrc1.{name}"), f, 0, why)
        };
        r1("priority", rsrc1::PRIORITY, "pilot dispatches at normal priority")?;
        r1("priv", rsrc1::PRIV, "set by the dispatch, not the code object")?;
        r1("debug_mode", rsrc1::DEBUG_MODE, "no debugger")?;
        r1("bulky", rsrc1::BULKY, "not a compute mode pilot uses")?;
        r1("cdbg_user", rsrc1::CDBG_USER, "no debugger")?;
        r1("reserved", rsrc1::RESERVED, "reserved")?;

        let r2 = |name: &str, f: Field, why: &str| {
            must(self.compute_pgm_rsrc2, &format!("compute_pgm_rsrc2.{name}"), f, 0, why)
        };
        r2(
            if gfx12 { "enable_dynamic_vgpr" } else { "enable_trap_handler" },
            rsrc2::BIT6,
            "no trap handler or dynamic VGPRs",
        )?;
        r2("enable_exception_address_watch", rsrc2::ENABLE_EXCEPTION_ADDRESS_WATCH, "no trap handler")?;
        r2("enable_exception_memory", rsrc2::ENABLE_EXCEPTION_MEMORY, "no trap handler")?;
        r2("granulated_lds_size", rsrc2::GRANULATED_LDS_SIZE, "the dispatch fills it from group_segment_fixed_size")?;
        r2("enable_exception_fp", rsrc2::FP_EXCEPTIONS, "no trap handler")?;
        r2(if gfx12 { "wgp_takeover" } else { "reserved" }, rsrc2::BIT31, "not a mode pilot sets up")?;
        if get(self.compute_pgm_rsrc2, rsrc2::ENABLE_VGPR_WORKITEM_ID) == 3 {
            return Err(refuse("compute_pgm_rsrc2.enable_vgpr_workitem_id", "is 3 (undefined)"));
        }
        if !self.scratch_enabled() && self.private_segment_fixed_size != 0 {
            return Err(refuse(
                "compute_pgm_rsrc2.enable_private_segment",
                format!("is 0 but the kernel asks for {} scratch bytes", self.private_segment_fixed_size),
            ));
        }

        let r3 = |name: &str, f: Field, why: &str| {
            must(self.compute_pgm_rsrc3, &format!("compute_pgm_rsrc3.{name}"), f, 0, why)
        };
        r3(if gfx12 { "reserved0" } else { "shared_vgpr_count" }, rsrc3::LOW4, "wave32 shares no VGPRs")?;
        if !gfx12 {
            r3("trap_on_start", rsrc3::GFX11_TRAP_ON_START, "no trap handler")?;
            r3("trap_on_end", rsrc3::GFX11_TRAP_ON_END, "no trap handler")?;
            r3("reserved3", rsrc3::BIT13, "reserved")?;
        }
        r3("reserved2", rsrc3::RESERVED12, "reserved")?;
        r3("reserved4", rsrc3::RESERVED, "reserved")?;
        Ok(())
    }

    /// VGPRs per work-item the descriptor allocates: granules of 8 for wave32 on GFX10+.
    pub fn vgprs(&self) -> u32 {
        (get(self.compute_pgm_rsrc1, rsrc1::GRANULATED_WORKITEM_VGPR_COUNT) + 1) * 8
    }

    /// User SGPRs the hardware loads from COMPUTE_USER_DATA_* (`compute_pgm_rsrc2.user_sgpr_count`).
    pub fn user_sgprs(&self) -> u32 {
        get(self.compute_pgm_rsrc2, rsrc2::USER_SGPR_COUNT)
    }

    pub fn wave32(&self) -> bool {
        get(u32::from(self.kernel_code_properties), props::ENABLE_WAVEFRONT_SIZE32) == 1
    }

    pub fn kernarg_ptr(&self) -> bool {
        get(u32::from(self.kernel_code_properties), props::ENABLE_SGPR_KERNARG_SEGMENT_PTR) == 1
    }

    pub fn workgroup_ids(&self) -> [bool; 3] {
        let r2 = self.compute_pgm_rsrc2;
        [rsrc2::ENABLE_SGPR_WORKGROUP_ID_X, rsrc2::ENABLE_SGPR_WORKGROUP_ID_Y, rsrc2::ENABLE_SGPR_WORKGROUP_ID_Z]
            .map(|f| get(r2, f) == 1)
    }

    /// How many work-item id dimensions the hardware writes into v0 (1 to 3).
    pub fn workitem_id_dims(&self) -> u32 {
        get(self.compute_pgm_rsrc2, rsrc2::ENABLE_VGPR_WORKITEM_ID) + 1
    }

    pub fn scratch_enabled(&self) -> bool {
        get(self.compute_pgm_rsrc2, rsrc2::ENABLE_PRIVATE_SEGMENT) == 1
    }
}

/// The `compute_pgm_rsrc2.granulated_lds_size` value for `bytes` of LDS: 512-byte granules on GFX11+
/// (tinygrad `tinygrad/runtime/ops_amd.py` `AMDProgram`: `(lds + 511) // 512`). `None` when it does not fit.
pub fn lds_granules(bytes: u32) -> Option<u32> {
    Some(bytes.div_ceil(512)).filter(|&g| g < 1 << rsrc2::GRANULATED_LDS_SIZE.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The descriptor clang-19 wrote for a gfx1100 kernel with three buffer arguments.
    fn sample() -> [u8; SIZE] {
        let mut b = [0u8; SIZE];
        b[8] = 24;
        b[16..24].copy_from_slice(&0x1100i64.to_le_bytes());
        b[48..52].copy_from_slice(&0x60AF_0080u32.to_le_bytes());
        b[52..56].copy_from_slice(&0x9Eu32.to_le_bytes());
        b[56..58].copy_from_slice(&0x0408u16.to_le_bytes());
        b
    }

    #[test]
    fn fields_of_a_clang_descriptor() {
        let d = Descriptor::parse(&sample()).unwrap();
        d.check(Arch::Gfx1100).unwrap();
        assert_eq!(d.kernarg_size, 24);
        assert_eq!(d.kernel_code_entry_byte_offset, 0x1100);
        assert_eq!(d.user_sgprs(), 15);
        assert!(d.wave32() && d.kernarg_ptr());
        assert_eq!(d.workgroup_ids(), [true, false, false]);
        assert_eq!(d.workitem_id_dims(), 1);
        assert_eq!(d.vgprs(), 8);
        assert_eq!(get(d.compute_pgm_rsrc1, rsrc1::FLOAT_DENORM_MODE_32), 3);
    }

    #[test]
    fn unaccounted_bits_are_refused_by_name() {
        let refused = |offset: usize, bit: u32| {
            let mut b = sample();
            let mut w = u32::from_le_bytes(b[offset..offset + 4].try_into().unwrap());
            w ^= 1 << bit;
            b[offset..offset + 4].copy_from_slice(&w.to_le_bytes());
            match Descriptor::parse(&b) {
                Err(r) => r.field,
                Ok(d) => d.check(Arch::Gfx1100).err().map(|r| r.field).unwrap_or_default(),
            }
        };
        assert_eq!(refused(56, 10), "kernel_code_properties.enable_wavefront_size32");
        assert_eq!(refused(56, 1), "kernel_code_properties.enable_sgpr_dispatch_ptr");
        assert_eq!(refused(56, 2), "kernel_code_properties.enable_sgpr_queue_ptr");
        assert_eq!(refused(56, 11), "kernel_code_properties.uses_dynamic_stack");
        assert_eq!(refused(56, 16), "kernarg_preload");
        assert_eq!(refused(48, 22), "compute_pgm_rsrc1.debug_mode");
        assert_eq!(refused(48, 27), "compute_pgm_rsrc1.reserved");
        assert_eq!(refused(52, 6), "compute_pgm_rsrc2.enable_trap_handler");
        assert_eq!(refused(52, 15), "compute_pgm_rsrc2.granulated_lds_size");
        assert_eq!(refused(52, 26), "compute_pgm_rsrc2.enable_exception_fp");
        assert_eq!(refused(44, 10), "compute_pgm_rsrc3.trap_on_start");
        assert_eq!(refused(44, 20), "compute_pgm_rsrc3.reserved4");
        assert_eq!(refused(12, 0), "descriptor.reserved0");
        assert_eq!(refused(28, 5), "descriptor.reserved1");
        // Bits pilot accounts for: float modes, IEEE mode, WGP mode, instruction prefetch, workgroup ids.
        for (offset, bit) in [(48, 12), (48, 23), (48, 29), (44, 4), (52, 8), (52, 11)] {
            assert_eq!(refused(offset, bit), "", "offset {offset} bit {bit}");
        }
    }

    #[test]
    fn lds_granules_round_up_and_bound() {
        assert_eq!(lds_granules(0), Some(0));
        assert_eq!(lds_granules(1), Some(1));
        assert_eq!(lds_granules(512), Some(1));
        assert_eq!(lds_granules(65536), Some(128));
        assert_eq!(lds_granules(512 * 512), None);
    }
}
