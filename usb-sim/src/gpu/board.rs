//! The boards the simulated GPU can be: their IP versions, the register base segments the simulator puts in
//! its discovery table, the GC facts of that table, and the firmware files the PSP checks against.
//!
//! IP versions are Linux amdgpu's for these chips (Navi31: GC 11.0.0, MP0/MP1 13.0.0, SDMA 6.0.0; Navi48:
//! GC 12.0.1, MP0/MP1 14.0.3, SDMA 7.0.1). The base segments are the simulator's choice except where the
//! hardware fixes them: GC segment 0 is 0x1260 because PM4 SET_SH_REG offsets count from register 0x2C00
//! (Linux `nvd.h` `PACKET3_SET_SH_REG_START`), and NBIO segment 2 is 0xD20 because `RCC_CONFIG_MEMSIZE` is
//! read at the fixed register 0xDE3 before the table is known (tinygrad `amdev.py` `_run_discovery`).

/// Which GPU the simulator is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Board {
    /// RX 7900 XTX (gfx1100).
    #[default]
    Navi31,
    /// RX 9070 XT (gfx1201).
    Navi48,
}

/// The IP blocks the simulated GPU has registers in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ip {
    Gc,
    Sdma0,
    Mmhub,
    Nbio,
    Mp0,
    Mp1,
    Hdp,
    Osssys,
}

impl Ip {
    pub const ALL: [Ip; 8] = [Ip::Gc, Ip::Sdma0, Ip::Mmhub, Ip::Nbio, Ip::Mp0, Ip::Mp1, Ip::Hdp, Ip::Osssys];

    /// The hardware id in the discovery table (Linux `soc15_hw_ip.h`: GC 11, SDMA0 42, MMHUB 34, NBIF 108,
    /// MP0 255, MP1 1, HDP 41, OSSSYS 40).
    pub fn hw_id(self) -> u16 {
        match self {
            Ip::Gc => 11,
            Ip::Sdma0 => 42,
            Ip::Mmhub => 34,
            Ip::Nbio => 108,
            Ip::Mp0 => 255,
            Ip::Mp1 => 1,
            Ip::Hdp => 41,
            Ip::Osssys => 40,
        }
    }
}

/// What the discovery table's `gc_info` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcInfo {
    pub num_se: u32,
    pub wgp0_per_sa: u32,
    pub wgp1_per_sa: u32,
    pub rb_per_se: u32,
    pub gl2c: u32,
    pub gprs: u32,
    pub wave_size: u32,
    pub max_waves_per_simd: u32,
    pub max_scratch_slots_per_cu: u32,
    pub lds_size: u32,
    pub sa_per_se: u32,
}

impl GcInfo {
    /// Compute units: two per WGP.
    pub fn cus(&self) -> u32 {
        self.num_se * self.sa_per_se * (self.wgp0_per_sa + self.wgp1_per_sa) * 2
    }
}

impl Board {
    pub fn name(self) -> &'static str {
        match self {
            Board::Navi31 => "gfx1100",
            Board::Navi48 => "gfx1201",
        }
    }

    /// (major, minor, revision) of `ip`.
    pub fn version(self, ip: Ip) -> (u8, u8, u8) {
        match (self, ip) {
            (Board::Navi31, Ip::Gc) => (11, 0, 0),
            (Board::Navi31, Ip::Sdma0) => (6, 0, 0),
            (Board::Navi31, Ip::Mmhub) => (3, 0, 0),
            (Board::Navi31, Ip::Nbio) => (4, 3, 0),
            (Board::Navi31, Ip::Mp0 | Ip::Mp1) => (13, 0, 0),
            (Board::Navi31, Ip::Hdp) => (6, 0, 0),
            (Board::Navi31, Ip::Osssys) => (6, 0, 0),
            (Board::Navi48, Ip::Gc) => (12, 0, 1),
            (Board::Navi48, Ip::Sdma0) => (7, 0, 1),
            (Board::Navi48, Ip::Mmhub) => (4, 1, 0),
            (Board::Navi48, Ip::Nbio) => (6, 3, 1),
            (Board::Navi48, Ip::Mp0 | Ip::Mp1) => (14, 0, 3),
            (Board::Navi48, Ip::Hdp) => (7, 0, 0),
            (Board::Navi48, Ip::Osssys) => (7, 0, 0),
        }
    }

    /// The base segments of `ip` (dword register indices), as written to the discovery table.
    pub fn bases(self, ip: Ip) -> &'static [u32] {
        match ip {
            // SDMA 6/7 registers sit in the GC aperture (Linux `gc_11_0_0_offset.h` carries `regSDMA0_*`).
            Ip::Gc | Ip::Sdma0 => &[0x1260, 0xA000, 0x1_C000, 0x240_2C00],
            Ip::Mmhub => &[0x1_A000, 0x240_8800],
            Ip::Nbio => &[0x0000_0000, 0x14, 0xD20, 0x1_0400, 0x241_B000, 0x4_0000],
            Ip::Mp0 | Ip::Mp1 => &[0x1_6000, 0x243_FC00, 0xDC_0000, 0xE0_0000],
            Ip::Hdp => &[0xF20, 0x240_A400],
            Ip::Osssys => &[0x10A0, 0x240_A000],
        }
    }

    pub fn gc_info(self) -> GcInfo {
        match self {
            // Navi31: 6 SEs x 2 SAs x 4 WGPs = 96 CUs.
            Board::Navi31 => GcInfo {
                num_se: 6,
                wgp0_per_sa: 4,
                wgp1_per_sa: 0,
                rb_per_se: 4,
                gl2c: 24,
                gprs: 1536,
                wave_size: 32,
                max_waves_per_simd: 16,
                max_scratch_slots_per_cu: 32,
                lds_size: 64,
                sa_per_se: 2,
            },
            // Navi48: 4 SEs x 2 SAs x 4 WGPs = 64 CUs.
            Board::Navi48 => GcInfo {
                num_se: 4,
                wgp0_per_sa: 4,
                wgp1_per_sa: 0,
                rb_per_se: 4,
                gl2c: 16,
                gprs: 1536,
                wave_size: 32,
                max_waves_per_simd: 16,
                max_scratch_slots_per_cu: 32,
                lds_size: 64,
                sa_per_se: 2,
            },
        }
    }

    /// The version part of firmware file names (`psp_13_0_0_sos.bin`, `gc_11_0_0_mec.bin`).
    pub fn file_stem(self, ip: Ip) -> String {
        let (a, b, c) = self.version(ip);
        format!("{a}_{b}_{c}")
    }

    /// MP0 14 and later (MPASP): the PSP takes `LOAD_TOS_SPL_TABLE` from the SPL part of the sOS file; MP0 13
    /// is given the KDB part again in that slot (Linux `psp_v13_0.c`, tinygrad `AM_PSP.init_hw` `spl_key`).
    pub fn mp0_major(self) -> u8 {
        self.version(Ip::Mp0).0
    }

    /// Whether the PSP sets up the TMR itself at boot (no `SETUP_TMR`): tinygrad `AM_PSP.init_sw` `boot_time_tmr`.
    pub fn boot_time_tmr(self) -> bool {
        self == Board::Navi48
    }
}
