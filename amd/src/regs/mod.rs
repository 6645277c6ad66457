//! The AMD registers pilot programs, as data: one generated module per IP version (from
//! `amd/regs/<ip>_<version>.regs` at build time, Linux's `asic_reg` headers; see regs-gen/src/lib.rs for the API),
//! and the glue that picks the right one for a card.
//!
//! A register's dword address on the bus is `bases[ip][BASE_IDX] + OFFSET`, the bases coming from the
//! discovery table ([`crate::discovery`]). Code that runs on both cards names a register once through
//! the per-IP macros ([`gc!`], [`mmhub!`], [`osssys!`], [`nbio!`], [`hdp!`]): the body is compiled against
//! each version's module, so a register or field missing in one version is a compile error, not a wrong
//! write. The versions (Linux `amdgpu_discovery.c`, tinygrad `amdev.py` `_build_regs`):
//!
//! | card | GC | MMHUB | OSSSYS | NBIO | HDP | MP0 (PSP) | MP1 (SMU mailbox) |
//! |---|---|---|---|---|---|---|---|
//! | gfx1100 | `gc_11_0_0` | `mmhub_3_0_0` | `osssys_6_0_0` | `nbio_4_3_0` | `hdp_6_0_0` | `mp_13_0_0` | `mp_11_0_0` |
//! | gfx1201 | `gc_12_0_0` (for 12.0.1) | `mmhub_4_1_0` | `osssys_7_0_0` | `nbif_6_3_1` | `hdp_7_0_0` | `mp_14_0_2` (for 14.0.3) | `mp_11_0_0` |
//!
//! SDMA 6/7's registers (`SDMA0_*`) live in the GC tables, as in Linux.

// `pub mod <ip>_<version>`, generated from `amd/regs/<ip>_<version>.regs` by build.rs.
include!(concat!(env!("OUT_DIR"), "/gc_11_0_0.rs"));
include!(concat!(env!("OUT_DIR"), "/gc_12_0_0.rs"));
include!(concat!(env!("OUT_DIR"), "/hdp_6_0_0.rs"));
include!(concat!(env!("OUT_DIR"), "/hdp_7_0_0.rs"));
include!(concat!(env!("OUT_DIR"), "/mmhub_3_0_0.rs"));
include!(concat!(env!("OUT_DIR"), "/mmhub_4_1_0.rs"));
include!(concat!(env!("OUT_DIR"), "/mp_11_0_0.rs"));
include!(concat!(env!("OUT_DIR"), "/mp_13_0_0.rs"));
include!(concat!(env!("OUT_DIR"), "/mp_14_0_2.rs"));
include!(concat!(env!("OUT_DIR"), "/nbif_6_3_1.rs"));
include!(concat!(env!("OUT_DIR"), "/nbio_4_3_0.rs"));
include!(concat!(env!("OUT_DIR"), "/osssys_6_0_0.rs"));
include!(concat!(env!("OUT_DIR"), "/osssys_7_0_0.rs"));

/// A hardware IP whose register bases the discovery table gives (Linux `amd_hw_ip_block_type`, the ones
/// pilot programs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HwIp {
    Gc,
    Hdp,
    Sdma0,
    Mmhub,
    Nbio,
    Mp0,
    Mp1,
    Osssys,
}

impl HwIp {
    pub const ALL: [HwIp; 8] =
        [HwIp::Gc, HwIp::Hdp, HwIp::Sdma0, HwIp::Mmhub, HwIp::Nbio, HwIp::Mp0, HwIp::Mp1, HwIp::Osssys];

    pub fn name(self) -> &'static str {
        match self {
            HwIp::Gc => "GC",
            HwIp::Hdp => "HDP",
            HwIp::Sdma0 => "SDMA0",
            HwIp::Mmhub => "MMHUB",
            HwIp::Nbio => "NBIO",
            HwIp::Mp0 => "MP0",
            HwIp::Mp1 => "MP1",
            HwIp::Osssys => "OSSSYS",
        }
    }
}

/// Where one register lives: its IP, the base segment and the offset in it, and its name for errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegAddr {
    pub ip: HwIp,
    pub base: u32,
    pub offset: u32,
    pub name: &'static str,
}

/// The [`RegAddr`] of a generated register type: `reg!(HwIp::Gc, m::GRBM_CNTL)`.
macro_rules! reg {
    ($ip:expr, $m:ident :: $r:ident) => {
        $crate::regs::RegAddr { ip: $ip, base: $m::$r::BASE_IDX, offset: $m::$r::OFFSET, name: stringify!($r) }
    };
}

/// Runs `body` with `m` naming the card's GC module (which also holds SDMA 6/7's registers).
macro_rules! gc {
    ($card:expr, $m:ident => $body:expr) => {
        match $card {
            $crate::firmware::Card::Gfx1100 => {
                use $crate::regs::gc_11_0_0 as $m;
                $body
            }
            $crate::firmware::Card::Gfx1201 => {
                use $crate::regs::gc_12_0_0 as $m;
                $body
            }
        }
    };
}

/// Runs `body` with `m` naming the card's MMHUB module.
macro_rules! mmhub {
    ($card:expr, $m:ident => $body:expr) => {
        match $card {
            $crate::firmware::Card::Gfx1100 => {
                use $crate::regs::mmhub_3_0_0 as $m;
                $body
            }
            $crate::firmware::Card::Gfx1201 => {
                use $crate::regs::mmhub_4_1_0 as $m;
                $body
            }
        }
    };
}

/// Runs `body` with `m` naming the card's OSSSYS (interrupt handler) module.
macro_rules! osssys {
    ($card:expr, $m:ident => $body:expr) => {
        match $card {
            $crate::firmware::Card::Gfx1100 => {
                use $crate::regs::osssys_6_0_0 as $m;
                $body
            }
            $crate::firmware::Card::Gfx1201 => {
                use $crate::regs::osssys_7_0_0 as $m;
                $body
            }
        }
    };
}

/// Runs `body` with `m` naming the card's NBIO/NBIF module.
macro_rules! nbio {
    ($card:expr, $m:ident => $body:expr) => {
        match $card {
            $crate::firmware::Card::Gfx1100 => {
                use $crate::regs::nbio_4_3_0 as $m;
                $body
            }
            $crate::firmware::Card::Gfx1201 => {
                use $crate::regs::nbif_6_3_1 as $m;
                $body
            }
        }
    };
}

/// Runs `body` with `m` naming the card's HDP module.
macro_rules! hdp {
    ($card:expr, $m:ident => $body:expr) => {
        match $card {
            $crate::firmware::Card::Gfx1100 => {
                use $crate::regs::hdp_6_0_0 as $m;
                $body
            }
            $crate::firmware::Card::Gfx1201 => {
                use $crate::regs::hdp_7_0_0 as $m;
                $body
            }
        }
    };
}

pub(crate) use {gc, hdp, mmhub, nbio, osssys, reg};

/// The PSP's C2P mailbox registers pilot uses (`MP0_SMN_C2PMSG_n` on MP0 13, `MPASP_SMN_C2PMSG_n` on MP0 14;
/// tinygrad `ip.py` `AM_PSP.reg_pref`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PspMsg {
    /// 35: bootloader command and ready bit 31.
    Bl35,
    /// 36: bootloader image address (MC address >> 20).
    Bl36,
    /// 64: KM ring control and sOS ready bit 31.
    Ring64,
    /// 67: KM ring write pointer, in dwords.
    Wptr67,
    /// 69/70: KM ring MC address, low and high.
    RingLo69,
    RingHi70,
    /// 71: KM ring size in bytes.
    RingSize71,
    /// 81: nonzero once sOS runs.
    Sos81,
}

/// The PSP mailbox register `msg` on the card's MP0.
pub fn psp_msg(card: crate::firmware::Card, msg: PspMsg) -> RegAddr {
    use crate::firmware::Card;
    match card {
        Card::Gfx1100 => {
            use mp_13_0_0 as m;
            match msg {
                PspMsg::Bl35 => reg!(HwIp::Mp0, m::MP0_SMN_C2PMSG_35),
                PspMsg::Bl36 => reg!(HwIp::Mp0, m::MP0_SMN_C2PMSG_36),
                PspMsg::Ring64 => reg!(HwIp::Mp0, m::MP0_SMN_C2PMSG_64),
                PspMsg::Wptr67 => reg!(HwIp::Mp0, m::MP0_SMN_C2PMSG_67),
                PspMsg::RingLo69 => reg!(HwIp::Mp0, m::MP0_SMN_C2PMSG_69),
                PspMsg::RingHi70 => reg!(HwIp::Mp0, m::MP0_SMN_C2PMSG_70),
                PspMsg::RingSize71 => reg!(HwIp::Mp0, m::MP0_SMN_C2PMSG_71),
                PspMsg::Sos81 => reg!(HwIp::Mp0, m::MP0_SMN_C2PMSG_81),
            }
        }
        Card::Gfx1201 => {
            use mp_14_0_2 as m;
            match msg {
                PspMsg::Bl35 => reg!(HwIp::Mp0, m::MPASP_SMN_C2PMSG_35),
                PspMsg::Bl36 => reg!(HwIp::Mp0, m::MPASP_SMN_C2PMSG_36),
                PspMsg::Ring64 => reg!(HwIp::Mp0, m::MPASP_SMN_C2PMSG_64),
                PspMsg::Wptr67 => reg!(HwIp::Mp0, m::MPASP_SMN_C2PMSG_67),
                PspMsg::RingLo69 => reg!(HwIp::Mp0, m::MPASP_SMN_C2PMSG_69),
                PspMsg::RingHi70 => reg!(HwIp::Mp0, m::MPASP_SMN_C2PMSG_70),
                PspMsg::RingSize71 => reg!(HwIp::Mp0, m::MPASP_SMN_C2PMSG_71),
                PspMsg::Sos81 => reg!(HwIp::Mp0, m::MPASP_SMN_C2PMSG_81),
            }
        }
    }
}

/// The SMU mailboxes (tinygrad `ip.py` `AM_SMU._smu_cmn_send_msg`: `mp_11_0_0` offsets over the MP1 bases on
/// every card): the regular one (response 90, argument 82, message 66) and the debug one (54, 53, 75).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmuMailbox {
    pub resp: RegAddr,
    pub arg: RegAddr,
    pub msg: RegAddr,
}

impl SmuMailbox {
    pub fn regular() -> SmuMailbox {
        use mp_11_0_0 as m;
        SmuMailbox {
            resp: reg!(HwIp::Mp1, m::MP1_SMN_C2PMSG_90),
            arg: reg!(HwIp::Mp1, m::MP1_SMN_C2PMSG_82),
            msg: reg!(HwIp::Mp1, m::MP1_SMN_C2PMSG_66),
        }
    }

    pub fn debug() -> SmuMailbox {
        use mp_11_0_0 as m;
        SmuMailbox {
            resp: reg!(HwIp::Mp1, m::MP1_SMN_C2PMSG_54),
            arg: reg!(HwIp::Mp1, m::MP1_SMN_C2PMSG_53),
            msg: reg!(HwIp::Mp1, m::MP1_SMN_C2PMSG_75),
        }
    }
}

/// `RCC_CONFIG_MEMSIZE`: VRAM size in MB, at a fixed dword address readable before the discovery table
/// gives any base (tinygrad `amdev.py` `_run_discovery`, `mmRCC_CONFIG_MEMSIZE = 0xde3`).
pub const RCC_CONFIG_MEMSIZE: u32 = 0xde3;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::firmware::Card;

    #[test]
    fn per_card_modules_differ_where_linux_does() {
        let a = gc!(Card::Gfx1100, m => reg!(HwIp::Gc, m::RLC_RLCS_BOOTLOAD_STATUS));
        let b = gc!(Card::Gfx1201, m => reg!(HwIp::Gc, m::RLC_RLCS_BOOTLOAD_STATUS));
        assert_eq!((a.base, a.offset, b.base, b.offset), (1, 0x4e82, 1, 0x4e7c));
        assert_eq!(psp_msg(Card::Gfx1100, PspMsg::Sos81).offset, 0x91);
        assert_eq!(SmuMailbox::regular().resp.offset, 0x29a);
        let v = gc!(Card::Gfx1100, m => m::GRBM_CNTL::new().with_read_timeout(0xff).bits());
        assert_eq!(v, 0xff);
    }
}
