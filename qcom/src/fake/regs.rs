//! The fake command processor's own a6xx tables: register offsets, bit fields, enum values and packet opcodes.
//!
//! They are written from Mesa's `src/freedreno/registers/adreno/a6xx.xml` and `adreno_pm4.xml` (the names are
//! Mesa's) and on purpose share nothing with the encoder (`crate::pm4`, `crate::dispatch`): a wrong offset or field
//! there must not move the fake with it. `qcom/tests/peer_tables.rs` checks every entry here against tinygrad's
//! generated copy of Mesa's tables (`tinygrad/runtime/autogen/mesa.py`).

/// A register the fake accepts writes to: its Mesa name (`REG_A6XX_<name>`), offset, and width in dwords.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reg {
    pub name: &'static str,
    pub offset: u32,
    pub dwords: u32,
}

/// A bit field of a register, descriptor dword or packet dword: Mesa names it `<prefix>_<name>` (single bits) or
/// `<prefix>_<name>__SHIFT` / `__MASK`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub prefix: &'static str,
    pub name: &'static str,
    pub low: u32,
    pub high: u32,
}

impl Field {
    pub const fn mask(self) -> u32 {
        (u32::MAX >> (31 - (self.high - self.low))) << self.low
    }

    /// The field's value in `word`.
    pub const fn get(self, word: u32) -> u32 {
        (word & self.mask()) >> self.low
    }

    /// The Mesa constant that names the field (`A6XX_SP_CS_CONFIG_NTEX`).
    pub fn mesa_name(&self) -> String {
        format!("{}_{}", self.prefix, self.name)
    }
}

macro_rules! regs {
    ($($name:ident = $offset:expr, $dwords:expr;)*) => {
        $(pub const $name: Reg = Reg { name: stringify!($name), offset: $offset, dwords: $dwords };)*
        /// Every register a compute stream may write.
        pub const WRITABLE: &[Reg] = &[$($name),*];
    };
}

regs! {
    SP_CS_CNTL_0 = 0xa9b0, 1;
    SP_CS_CNTL_1 = 0xa9b1, 1;
    SP_CS_BOOLEAN_CF_MASK = 0xa9b2, 1;
    SP_CS_PROGRAM_COUNTER_OFFSET = 0xa9b3, 1;
    SP_CS_BASE = 0xa9b4, 2;
    SP_CS_PVT_MEM_PARAM = 0xa9b6, 1;
    SP_CS_PVT_MEM_BASE = 0xa9b7, 2;
    SP_CS_PVT_MEM_SIZE = 0xa9b9, 1;
    SP_CS_TSIZE = 0xa9ba, 1;
    SP_CS_CONFIG = 0xa9bb, 1;
    SP_CS_INSTR_SIZE = 0xa9bc, 1;
    SP_CS_PVT_MEM_STACK_OFFSET = 0xa9bd, 1;
    SP_CS_SAMPLER_BASE = 0xa9e2, 2;
    SP_CS_TEXMEMOBJ_BASE = 0xa9e6, 2;
    SP_CS_UAV_BASE = 0xa9f2, 2;
    SP_CS_USIZE = 0xaa00, 1;
    SP_MODE_CNTL = 0xab00, 1;
    SP_PERFCTR_SHADER_MASK = 0xae0f, 1;
    TPL1_CS_BORDER_COLOR_BASE = 0xb180, 2;
    TPL1_MODE_CNTL = 0xb309, 1;
    TPL1_DBG_ECO_CNTL = 0xb600, 1;
    SP_REG_PROG_ID_0 = 0xb983, 1;
    SP_REG_PROG_ID_1 = 0xb984, 1;
    SP_REG_PROG_ID_2 = 0xb985, 1;
    SP_REG_PROG_ID_3 = 0xb986, 1;
    SP_CS_CONST_CONFIG = 0xb987, 1;
    SP_CS_NDRANGE_0 = 0xb990, 1;
    SP_CS_NDRANGE_1 = 0xb991, 1;
    SP_CS_NDRANGE_2 = 0xb992, 1;
    SP_CS_NDRANGE_3 = 0xb993, 1;
    SP_CS_NDRANGE_4 = 0xb994, 1;
    SP_CS_NDRANGE_5 = 0xb995, 1;
    SP_CS_NDRANGE_6 = 0xb996, 1;
    SP_CS_CONST_CONFIG_0 = 0xb997, 1;
    SP_CS_WGE_CNTL = 0xb998, 1;
    SP_CS_KERNEL_GROUP_X = 0xb999, 1;
    SP_CS_KERNEL_GROUP_Y = 0xb99a, 1;
    SP_CS_KERNEL_GROUP_Z = 0xb99b, 1;
    SP_UPDATE_CNTL = 0xbb08, 1;
}

/// The 19.2 MHz always-on counter: read by CP_REG_TO_MEM, never written.
pub const CP_ALWAYS_ON_COUNTER: Reg = Reg { name: "CP_ALWAYS_ON_COUNTER", offset: 0x980, dwords: 2 };

/// The register that dword `offset` belongs to, and the dword's index in it.
pub fn writable(offset: u32) -> Option<(Reg, u32)> {
    WRITABLE.iter().find(|r| (r.offset..r.offset + r.dwords).contains(&offset)).map(|r| (*r, offset - r.offset))
}

macro_rules! fields {
    ($($name:ident = $prefix:literal, $field:literal, $low:expr, $high:expr;)*) => {
        $(pub const $name: Field = Field { prefix: $prefix, name: $field, low: $low, high: $high };)*
        /// Every field the fake decodes.
        pub const FIELDS: &[Field] = &[$($name),*];
    };
}

fields! {
    NDRANGE_KERNELDIM = "A6XX_SP_CS_NDRANGE_0", "KERNELDIM", 0, 1;
    NDRANGE_LOCALSIZEX = "A6XX_SP_CS_NDRANGE_0", "LOCALSIZEX", 2, 11;
    NDRANGE_LOCALSIZEY = "A6XX_SP_CS_NDRANGE_0", "LOCALSIZEY", 12, 21;
    NDRANGE_LOCALSIZEZ = "A6XX_SP_CS_NDRANGE_0", "LOCALSIZEZ", 22, 31;
    CONFIG_BINDLESS_TEX = "A6XX_SP_CS_CONFIG", "BINDLESS_TEX", 0, 0;
    CONFIG_BINDLESS_SAMP = "A6XX_SP_CS_CONFIG", "BINDLESS_SAMP", 1, 1;
    CONFIG_BINDLESS_UAV = "A6XX_SP_CS_CONFIG", "BINDLESS_UAV", 2, 2;
    CONFIG_BINDLESS_UBO = "A6XX_SP_CS_CONFIG", "BINDLESS_UBO", 3, 3;
    CONFIG_ENABLED = "A6XX_SP_CS_CONFIG", "ENABLED", 8, 8;
    CONFIG_NTEX = "A6XX_SP_CS_CONFIG", "NTEX", 9, 16;
    CONFIG_NSAMP = "A6XX_SP_CS_CONFIG", "NSAMP", 17, 21;
    CONFIG_NUAV = "A6XX_SP_CS_CONFIG", "NUAV", 22, 28;
    CNTL_0_THREADMODE = "A6XX_SP_CS_CNTL_0", "THREADMODE", 0, 0;
    CNTL_0_HALFREGFOOTPRINT = "A6XX_SP_CS_CNTL_0", "HALFREGFOOTPRINT", 1, 6;
    CNTL_0_FULLREGFOOTPRINT = "A6XX_SP_CS_CNTL_0", "FULLREGFOOTPRINT", 7, 12;
    CNTL_0_BRANCHSTACK = "A6XX_SP_CS_CNTL_0", "BRANCHSTACK", 14, 19;
    CNTL_0_THREADSIZE = "A6XX_SP_CS_CNTL_0", "THREADSIZE", 20, 20;
    CNTL_1_SHARED_SIZE = "A6XX_SP_CS_CNTL_1", "SHARED_SIZE", 0, 4;
    CNTL_1_CONSTANTRAMMODE = "A6XX_SP_CS_CNTL_1", "CONSTANTRAMMODE", 5, 6;
    PVT_MEM_PARAM_MEMSIZEPERITEM = "A6XX_SP_CS_PVT_MEM_PARAM", "MEMSIZEPERITEM", 0, 7;
    PVT_MEM_SIZE_TOTALPVTMEMSIZE = "A6XX_SP_CS_PVT_MEM_SIZE", "TOTALPVTMEMSIZE", 0, 17;
    PVT_MEM_STACK_OFFSET_OFFSET = "A6XX_SP_CS_PVT_MEM_STACK_OFFSET", "OFFSET", 0, 18;
    MODE_CNTL_CONSTANT_DEMOTION_ENABLE = "A6XX_SP_MODE_CNTL", "CONSTANT_DEMOTION_ENABLE", 0, 0;
    MODE_CNTL_ISAMMODE = "A6XX_SP_MODE_CNTL", "ISAMMODE", 1, 2;
    TPL1_MODE_CNTL_ISAMMODE = "A6XX_TPL1_MODE_CNTL", "ISAMMODE", 0, 1;
    CONST_CONFIG_ENABLED = "A6XX_SP_CS_CONST_CONFIG", "ENABLED", 8, 8;
    CONST_CONFIG_0_WGIDCONSTID = "A6XX_SP_CS_CONST_CONFIG_0", "WGIDCONSTID", 0, 7;
    CONST_CONFIG_0_WGSIZECONSTID = "A6XX_SP_CS_CONST_CONFIG_0", "WGSIZECONSTID", 8, 15;
    CONST_CONFIG_0_LOCALIDREGID = "A6XX_SP_CS_CONST_CONFIG_0", "LOCALIDREGID", 24, 31;
    WGE_CNTL_LINEARLOCALIDREGID = "A6XX_SP_CS_WGE_CNTL", "LINEARLOCALIDREGID", 0, 7;
    WGE_CNTL_THREADSIZE = "A6XX_SP_CS_WGE_CNTL", "THREADSIZE", 9, 9;
    UPDATE_CNTL_CS_STATE = "A6XX_SP_UPDATE_CNTL", "CS_STATE", 5, 5;
    UPDATE_CNTL_CS_UAV = "A6XX_SP_UPDATE_CNTL", "CS_UAV", 6, 6;
    PERFCTR_SHADER_MASK_CS = "A6XX_SP_PERFCTR_SHADER_MASK", "CS", 5, 5;
    // Texture and IBO descriptors (A6XX_TEX_CONST dwords 0..5).
    TEX_TILE_MODE = "A6XX_TEX_CONST_0", "TILE_MODE", 0, 1;
    TEX_SRGB = "A6XX_TEX_CONST_0", "SRGB", 2, 2;
    TEX_SWIZ_X = "A6XX_TEX_CONST_0", "SWIZ_X", 4, 6;
    TEX_SWIZ_Y = "A6XX_TEX_CONST_0", "SWIZ_Y", 7, 9;
    TEX_SWIZ_Z = "A6XX_TEX_CONST_0", "SWIZ_Z", 10, 12;
    TEX_SWIZ_W = "A6XX_TEX_CONST_0", "SWIZ_W", 13, 15;
    TEX_MIPLVLS = "A6XX_TEX_CONST_0", "MIPLVLS", 16, 19;
    TEX_SAMPLES = "A6XX_TEX_CONST_0", "SAMPLES", 20, 21;
    TEX_FMT = "A6XX_TEX_CONST_0", "FMT", 22, 29;
    TEX_SWAP = "A6XX_TEX_CONST_0", "SWAP", 30, 31;
    TEX_WIDTH = "A6XX_TEX_CONST_1", "WIDTH", 0, 14;
    TEX_HEIGHT = "A6XX_TEX_CONST_1", "HEIGHT", 15, 29;
    TEX_PITCHALIGN = "A6XX_TEX_CONST_2", "PITCHALIGN", 0, 3;
    TEX_PITCH = "A6XX_TEX_CONST_2", "PITCH", 7, 28;
    TEX_TYPE = "A6XX_TEX_CONST_2", "TYPE", 29, 31;
    TEX_BASE_LO = "A6XX_TEX_CONST_4", "BASE_LO", 5, 31;
    TEX_BASE_HI = "A6XX_TEX_CONST_5", "BASE_HI", 0, 16;
    TEX_DEPTH = "A6XX_TEX_CONST_5", "DEPTH", 17, 29;
    // Samplers (A6XX_TEX_SAMP dwords 0..1).
    SAMP_MIPFILTER_LINEAR_NEAR = "A6XX_TEX_SAMP_0", "MIPFILTER_LINEAR_NEAR", 0, 0;
    SAMP_XY_MAG = "A6XX_TEX_SAMP_0", "XY_MAG", 1, 2;
    SAMP_XY_MIN = "A6XX_TEX_SAMP_0", "XY_MIN", 3, 4;
    SAMP_WRAP_S = "A6XX_TEX_SAMP_0", "WRAP_S", 5, 7;
    SAMP_WRAP_T = "A6XX_TEX_SAMP_0", "WRAP_T", 8, 10;
    SAMP_WRAP_R = "A6XX_TEX_SAMP_0", "WRAP_R", 11, 13;
    SAMP_ANISO = "A6XX_TEX_SAMP_0", "ANISO", 14, 16;
    SAMP_COMPARE_FUNC = "A6XX_TEX_SAMP_1", "COMPARE_FUNC", 1, 3;
    SAMP_UNNORM_COORDS = "A6XX_TEX_SAMP_1", "UNNORM_COORDS", 5, 5;
    // Packet payloads.
    LOAD_STATE_DST_OFF = "CP_LOAD_STATE6_0", "DST_OFF", 0, 13;
    LOAD_STATE_STATE_TYPE = "CP_LOAD_STATE6_0", "STATE_TYPE", 14, 15;
    LOAD_STATE_STATE_SRC = "CP_LOAD_STATE6_0", "STATE_SRC", 16, 17;
    LOAD_STATE_STATE_BLOCK = "CP_LOAD_STATE6_0", "STATE_BLOCK", 18, 21;
    LOAD_STATE_NUM_UNIT = "CP_LOAD_STATE6_0", "NUM_UNIT", 22, 31;
    EVENT_WRITE_EVENT = "CP_EVENT_WRITE_0", "EVENT", 0, 7;
    EVENT_WRITE_TIMESTAMP = "CP_EVENT_WRITE_0", "TIMESTAMP", 30, 30;
    EVENT_WRITE_IRQ = "CP_EVENT_WRITE_0", "IRQ", 31, 31;
    WAIT_REG_MEM_FUNCTION = "CP_WAIT_REG_MEM_0", "FUNCTION", 0, 2;
    WAIT_REG_MEM_SIGNED_COMPARE = "CP_WAIT_REG_MEM_0", "SIGNED_COMPARE", 3, 3;
    WAIT_REG_MEM_POLL = "CP_WAIT_REG_MEM_0", "POLL", 4, 5;
    WAIT_REG_MEM_WRITE_MEMORY = "CP_WAIT_REG_MEM_0", "WRITE_MEMORY", 8, 8;
    REG_TO_MEM_REG = "CP_REG_TO_MEM_0", "REG", 0, 17;
    REG_TO_MEM_CNT = "CP_REG_TO_MEM_0", "CNT", 18, 29;
    REG_TO_MEM_64B = "CP_REG_TO_MEM_0", "64B", 30, 30;
    REG_TO_MEM_ACCUMULATE = "CP_REG_TO_MEM_0", "ACCUMULATE", 31, 31;
    SET_MARKER_MODE = "A6XX_CP_SET_MARKER_0", "MODE", 0, 3;
}

macro_rules! values {
    ($($name:ident = $value:expr;)*) => {
        $(pub const $name: u32 = $value;)*
        /// Every enum value and opcode the fake uses, by Mesa name.
        pub const VALUES: &[(&str, u32)] = &[$((stringify!($name), $name)),*];
    };
}

values! {
    // Type-7 opcodes (adreno_pm4.xml).
    CP_WAIT_MEM_WRITES = 0x12;
    CP_WAIT_FOR_IDLE = 0x26;
    CP_RUN_OPENCL = 0x31;
    CP_LOAD_STATE6_GEOM = 0x32;
    CP_EXEC_CS = 0x33;
    CP_LOAD_STATE6_FRAG = 0x34;
    CP_LOAD_STATE6 = 0x36;
    CP_WAIT_REG_MEM = 0x3c;
    CP_REG_TO_MEM = 0x3e;
    CP_EVENT_WRITE = 0x46;
    CP_SET_MARKER = 0x65;
    // vgt_event_type.
    CACHE_FLUSH_TS = 4;
    CACHE_INVALIDATE = 49;
    // a6xx_marker, CP_LOAD_STATE6 state types, sources and blocks.
    RM6_COMPUTE = 8;
    ST6_SHADER = 0;
    ST6_CONSTANTS = 1;
    ST6_UAV = 3;
    SS6_INDIRECT = 2;
    SB6_CS_TEX = 5;
    SB6_CS_SHADER = 13;
    // cp_wait_reg_mem_function and poll.
    WRITE_EQ = 3;
    WRITE_GE = 5;
    POLL_MEMORY = 1;
    // a6xx_isam_mode, a6xx_threadsize.
    ISAMMODE_CL = 1;
    ISAMMODE_GL = 2;
    THREAD64 = 0;
    // Formats, texture types, swizzles, filters and wraps (a6xx_format, a6xx_tex_*).
    FMT6_16_16_16_16_FLOAT = 98;
    FMT6_32_32_32_32_FLOAT = 130;
    A6XX_TEX_2D = 1;
    A6XX_TEX_X = 0;
    A6XX_TEX_Y = 1;
    A6XX_TEX_Z = 2;
    A6XX_TEX_W = 3;
    A6XX_TEX_NEAREST = 0;
    A6XX_TEX_LINEAR = 1;
    A6XX_TEX_REPEAT = 0;
    A6XX_TEX_CLAMP_TO_EDGE = 1;
    A6XX_TEX_MIRROR_REPEAT = 2;
    A6XX_TEX_CLAMP_TO_BORDER = 3;
}

/// An a6xx `end` instruction, whatever its (ss)/(sy)/(jp)/(eq)/(rptN) flags: cat0 (bits 61..63 = 0), OPC 6 (bits
/// 55..58), OPC_HI bit 49 clear, no sources and no branch type (bits 37..39, 45..47, 52..54), from Mesa's
/// `src/freedreno/isa/ir3-cat0.xml` (`end`, `#instruction-cat0-0src`).
pub const A6XX_END_MASK: u64 = 0xe7f2_e0e0_0000_0000;
pub const A6XX_END: u64 = 6 << 55;

/// The opcodes the fake decodes: (opcode, Mesa name, payload lengths it takes).
pub const OPCODES: &[(u32, &str, &[usize])] = &[
    (CP_WAIT_MEM_WRITES, "CP_WAIT_MEM_WRITES", &[0]),
    (CP_WAIT_FOR_IDLE, "CP_WAIT_FOR_IDLE", &[0]),
    (CP_RUN_OPENCL, "CP_RUN_OPENCL", &[1]),
    (CP_LOAD_STATE6_GEOM, "CP_LOAD_STATE6_GEOM", &[3]),
    (CP_EXEC_CS, "CP_EXEC_CS", &[4]),
    (CP_LOAD_STATE6_FRAG, "CP_LOAD_STATE6_FRAG", &[3]),
    (CP_LOAD_STATE6, "CP_LOAD_STATE6", &[3]),
    (CP_WAIT_REG_MEM, "CP_WAIT_REG_MEM", &[6]),
    (CP_REG_TO_MEM, "CP_REG_TO_MEM", &[3]),
    (CP_EVENT_WRITE, "CP_EVENT_WRITE", &[1, 4]),
    (CP_SET_MARKER, "CP_SET_MARKER", &[1]),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_consistent() {
        for (i, a) in WRITABLE.iter().enumerate() {
            assert!(a.dwords == 1 || a.dwords == 2, "{}", a.name);
            for b in &WRITABLE[i + 1..] {
                let disjoint = a.offset + a.dwords <= b.offset || b.offset + b.dwords <= a.offset;
                assert!(disjoint && a.name != b.name, "{} overlaps {}", a.name, b.name);
            }
        }
        assert_eq!(writable(0xa9b5), Some((SP_CS_BASE, 1)));
        assert_eq!(writable(0xa9b8), Some((SP_CS_PVT_MEM_BASE, 1)));
        assert_eq!(writable(0xa9be), None);
        assert_eq!(CONFIG_NUAV.mask(), 0x1fc0_0000);
        assert_eq!(TEX_BASE_LO.mask(), 0xffff_ffe0);
        assert_eq!(NDRANGE_LOCALSIZEZ.get(0xffc0_0003), 0x3ff);
        for f in FIELDS {
            assert!(f.low <= f.high && f.high < 32, "{}", f.mesa_name());
        }
        // `end` as ir3-disasm shows it (tests/tests/cffdump.rs A6XX_CODE), with (sy)(jp) and (ss); `ret` and `nop`
        // are not `end`.
        for w in [0x0300_0000_0000_0000u64, 0x1b00_0000_0000_0000, 0x0300_1000_0000_0000] {
            assert_eq!(w & A6XX_END_MASK, A6XX_END, "{w:#x}");
        }
        for w in [0x0200_0000_0000_0000u64, 0, 0x0000_1000_0000_0000, 0x0302_0000_0000_0000] {
            assert_ne!(w & A6XX_END_MASK, A6XX_END, "{w:#x}");
        }
        for (op, name, _) in OPCODES {
            assert_eq!(VALUES.iter().find(|(n, _)| n == name).map(|v| v.1), Some(*op), "{name}");
        }
    }
}
