//! The IP discovery table: which IPs the GPU has, their versions and register bases, harvested instances and
//! the GC configuration (Linux `amdgpu_discovery.c` and `discovery.h`; tinygrad `amdev.py` `_run_discovery`).
//!
//! The table lies at VRAM end − 64 KB; VRAM's size comes from `RCC_CONFIG_MEMSIZE` (MB), the one register
//! readable before any base is known. pilot reads 10 KB there, checks the binary header's signature and
//! byte-sum checksum (Linux `amdgpu_discovery_verify_checksum`), the IP table's signature and checksum, and
//! every offset and count against the bytes it read.

use super::bus::GpuBus;
use super::regs::{HwIp, RCC_CONFIG_MEMSIZE};
use crate::firmware::{Card, IpVersion};
use std::collections::BTreeMap;
use std::mem::offset_of;
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, KnownLayout, Unaligned};

/// Where the table starts, counted back from VRAM's end, and how much of it pilot reads.
pub const TABLE_FROM_END: u64 = 64 << 10;
pub const TABLE_BYTES: usize = 10 << 10;

/// Linux `discovery.h`: `BINARY_SIGNATURE`, `DISCOVERY_TABLE_SIGNATURE` ("IPDS"), `HARVEST_TABLE_SIGNATURE`
/// ("HARV"), and the table ids of `binary_header.table_list`.
pub const BINARY_SIGNATURE: u32 = 0x2821_1407;
pub const DISCOVERY_TABLE_SIGNATURE: u32 = 0x5344_5049;
pub const HARVEST_TABLE_SIGNATURE: u32 = 0x5652_4148;
const TABLE_IP_DISCOVERY: usize = 0;
const TABLE_GC: usize = 1;
const TABLE_HARVEST_INFO: usize = 2;

/// The discovery hardware ids of the IPs pilot uses (Linux `soc15_hw_ip.h`; tinygrad `am.py` `hw_id_map`,
/// where NBIO is found under the NBIF id).
pub fn hw_id(ip: HwIp) -> u16 {
    match ip {
        HwIp::Mp1 => 1,
        HwIp::Gc => 11,
        HwIp::Mmhub => 34,
        HwIp::Osssys => 40,
        HwIp::Hdp => 41,
        HwIp::Sdma0 => 42,
        HwIp::Nbio => 108,
        HwIp::Mp0 => 255,
    }
}

/// A discovery table that is not there, is corrupt, or describes a GPU pilot does not boot: one line.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error(
        "discovery: RCC_CONFIG_MEMSIZE reads {0:#x} MB: no usable VRAM (is the GPU powered and its BARs assigned?)"
    )]
    NoVram(u32),
    #[error("discovery: {0}")]
    Bad(String),
    #[error("discovery: unsupported GPU: {0}")]
    Unsupported(String),
    #[error("discovery: {0}")]
    Bus(#[from] pilot_usb_bridge::error::Error),
}

/// One IP as the table lists it (instance 0, the one pilot programs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpInfo {
    pub version: IpVersion,
    /// The register base segments, as dword addresses.
    pub bases: Vec<u64>,
}

/// What `gc_info` says about the graphics core (v1.x and v2.x share these fields' offsets up to the LDS size).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcInfo {
    pub version: (u16, u16),
    pub num_se: u32,
    /// v1: WGPs per shader array (×2 = CUs); v2: CUs per shader array.
    pub cu_per_sa: u32,
    pub sa_per_se: u32,
    pub wave_size: u32,
    pub max_waves_per_simd: u32,
    pub max_scratch_slots_per_cu: u32,
    pub lds_size: u32,
}

impl GcInfo {
    /// Compute units on the chip.
    pub fn cu_count(&self) -> u32 {
        self.num_se * self.sa_per_se * self.cu_per_sa
    }
}

/// The parsed table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Discovery {
    pub vram_size: u64,
    pub card: Card,
    pub ips: BTreeMap<HwIp, IpInfo>,
    /// Harvested (fused-off) instances, by IP.
    pub harvested: BTreeMap<HwIp, Vec<u8>>,
    pub gc: GcInfo,
}

impl Discovery {
    /// The dword address of `offset` in base segment `base` of `ip`, if the table gave that segment.
    pub fn reg_addr(&self, ip: HwIp, base: u32, offset: u32) -> Option<u32> {
        let seg = *self.ips.get(&ip)?.bases.get(base as usize)?;
        u32::try_from(seg + u64::from(offset)).ok()
    }
}

/// Reads VRAM's size and the table from the GPU and parses it.
pub fn discover(bus: &mut dyn GpuBus) -> Result<Discovery, DiscoveryError> {
    let mb = bus.read_reg(RCC_CONFIG_MEMSIZE)?;
    let vram_size = u64::from(mb) << 20;
    // 0xffffffff is what a dead link reads as.
    if vram_size <= TABLE_FROM_END || mb == u32::MAX {
        return Err(DiscoveryError::NoVram(mb));
    }
    let mut table = vec![0u8; TABLE_BYTES];
    bus.read_vram(vram_size - TABLE_FROM_END, &mut table)?;
    parse(&table, vram_size)
}

/// `struct table_info` (Linux `discovery.h`): one entry of the binary header's table list.
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct TableInfo {
    offset: U16,
    checksum: U16,
    size: U16,
    padding: U16,
}

/// `struct binary_header`.
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct BinaryHeader {
    binary_signature: U32,
    version_major: U16,
    version_minor: U16,
    binary_checksum: U16,
    /// Bytes from `binary_checksum`'s end (byte 10) that the checksum covers, counted from byte 0.
    binary_size: U16,
    table_list: [TableInfo; 6],
}

/// `struct die_info`.
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct DieInfo {
    die_id: U16,
    die_offset: U16,
}

/// `struct ip_discovery_header` (the union after `die_info` read as its v4 bit field byte).
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct IpDiscoveryHeader {
    signature: U32,
    version: U16,
    size: U16,
    id: U32,
    num_dies: U16,
    die_info: [DieInfo; 16],
    /// Bit 0: `base_addr_64_bit`.
    flags: u8,
    padding: u8,
}

/// `struct die_header`.
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct DieHeader {
    die_id: U16,
    num_ips: U16,
}

/// `struct ip_v4` without its base addresses, which follow it (32 or 64 bits each).
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct IpEntry {
    hw_id: U16,
    instance_number: u8,
    num_base_address: u8,
    major: u8,
    minor: u8,
    revision: u8,
    variant_harvest: u8,
}

/// `struct harvest_info`.
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct HarvestInfo {
    hw_id: U16,
    number_instance: u8,
    reserved: u8,
}

/// `struct harvest_table`.
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct HarvestTable {
    signature: U32,
    version: U32,
    list: [HarvestInfo; 32],
}

/// `struct gc_info_v1_0` and `gc_info_v2_0` share this layout up to `gc_num_sa_per_se`; v1 counts WGPs in
/// `a`/`b` (`gc_num_wgp0_per_sa`, `gc_num_wgp1_per_sa`), v2 CUs per SH and SHs per SE
/// (`gc_num_cu_per_sh`, `gc_num_sh_per_se`).
#[derive(FromBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct GcInfoRaw {
    table_id: U32,
    version_major: U16,
    version_minor: U16,
    size: U32,
    gc_num_se: U32,
    a: U32,
    b: U32,
    gc_num_rb_per_se: U32,
    gc_num_gl2c: U32,
    gc_num_gprs: U32,
    gc_num_max_gs_thds: U32,
    gc_gs_table_depth: U32,
    gc_gsprim_buff_depth: U32,
    gc_parameter_cache_depth: U32,
    gc_double_offchip_lds_buffer: U32,
    gc_wave_size: U32,
    gc_max_waves_per_simd: U32,
    gc_max_scratch_slots_per_cu: U32,
    gc_lds_size: U32,
    gc_num_sc_per_se: U32,
    /// v1 only: `gc_num_sa_per_se` (v2's `gc_num_packer_per_sc`).
    gc_num_sa_per_se: U32,
}

const _: () = {
    assert!(size_of::<BinaryHeader>() == 60);
    assert!(size_of::<IpDiscoveryHeader>() == 80);
    assert!(size_of::<IpEntry>() == 8);
    assert!(size_of::<HarvestTable>() == 136);
    assert!(offset_of!(GcInfoRaw, gc_wave_size) == 56);
    assert!(offset_of!(GcInfoRaw, gc_num_sa_per_se) == 76);
};

/// The structure `T` at byte `at`, or an error naming it when it lies past the bytes read.
fn read<'a, T: FromBytes + KnownLayout + Immutable + Unaligned>(
    bytes: &'a [u8],
    at: usize,
    what: &str,
) -> Result<&'a T, DiscoveryError> {
    bytes.get(at..).and_then(|b| T::ref_from_prefix(b).ok()).map(|(t, _)| t).ok_or_else(|| past(bytes, at, what))
}

/// `n` base addresses of `W` (`U32` or `U64`) at byte `at`.
fn read_bases<W: FromBytes + Immutable + Unaligned + Copy>(
    bytes: &[u8],
    at: usize,
    n: usize,
) -> Result<&[W], DiscoveryError> {
    bytes
        .get(at..)
        .and_then(|b| <[W]>::ref_from_prefix_with_elems(b, n).ok())
        .map(|(t, _)| t)
        .ok_or_else(|| past(bytes, at, "ip.base_address"))
}

fn past(bytes: &[u8], at: usize, what: &str) -> DiscoveryError {
    DiscoveryError::Bad(format!("{what} at byte {at:#x} lies past the {:#x} bytes read", bytes.len()))
}

/// Linux `amdgpu_discovery_calculate_checksum`: the byte sum of `n` bytes at `at`, truncated to 16 bits.
fn checksum(bytes: &[u8], at: usize, n: usize, what: &str) -> Result<u16, DiscoveryError> {
    let b = bytes.get(at..at.saturating_add(n)).ok_or_else(|| past(bytes, at, what))?;
    Ok(b.iter().fold(0u16, |s, b| s.wrapping_add(u16::from(*b))))
}

/// Parses the table bytes (`binary_header` at 0) of a GPU with `vram_size` bytes of VRAM.
pub fn parse(bytes: &[u8], vram_size: u64) -> Result<Discovery, DiscoveryError> {
    let bad = |m: String| DiscoveryError::Bad(m);
    let header: &BinaryHeader = read(bytes, 0, "binary_header")?;
    let signature = header.binary_signature.get();
    if signature != BINARY_SIGNATURE {
        return Err(bad(format!(
            "binary_header.binary_signature is {signature:#010x}, not {BINARY_SIGNATURE:#010x} (no table at VRAM end - 64 KB)"
        )));
    }
    // binary_checksum covers binary_size bytes from the field after it (byte 10).
    let (sum, size) = (header.binary_checksum.get(), usize::from(header.binary_size.get()));
    if size < 12 {
        return Err(bad(format!("binary_header.binary_size {size} is smaller than the header")));
    }
    let got = checksum(bytes, 10, size - 10, "binary_header.binary_size")?;
    if got != sum {
        return Err(bad(format!("binary_header.binary_checksum is {sum:#06x}, the bytes sum to {got:#06x}")));
    }
    let table = |id: usize| {
        let t = &header.table_list[id];
        (usize::from(t.offset.get()), t.checksum.get())
    };

    let (ih_at, ih_sum) = table(TABLE_IP_DISCOVERY);
    let ih: &IpDiscoveryHeader = read(bytes, ih_at, "ip_discovery_header")?;
    let ih_signature = ih.signature.get();
    if ih_signature != DISCOVERY_TABLE_SIGNATURE {
        return Err(bad(format!(
            "ip_discovery_header.signature is {ih_signature:#010x}, not {DISCOVERY_TABLE_SIGNATURE:#010x}"
        )));
    }
    let got = checksum(bytes, ih_at, usize::from(ih.size.get()), "ip_discovery_header.size")?;
    if got != ih_sum {
        return Err(bad(format!("the IP discovery table's checksum is {ih_sum:#06x}, its bytes sum to {got:#06x}")));
    }
    let num_dies = usize::from(ih.num_dies.get());
    if num_dies == 0 || num_dies > ih.die_info.len() {
        return Err(bad(format!("ip_discovery_header.num_dies is {num_dies}, not 1..=16")));
    }
    let wide = ih.flags & 1 == 1;

    let mut ips: BTreeMap<HwIp, IpInfo> = BTreeMap::new();
    for die in &ih.die_info[..num_dies] {
        let die_at = usize::from(die.die_offset.get());
        let die: &DieHeader = read(bytes, die_at, "die_header")?;
        let mut at = die_at + size_of::<DieHeader>();
        for _ in 0..die.num_ips.get() {
            let ip: &IpEntry = read(bytes, at, "ip")?;
            let (n, bases_at) = (usize::from(ip.num_base_address), at + size_of::<IpEntry>());
            let bases: Vec<u64> = if wide {
                read_bases::<U64>(bytes, bases_at, n)?.iter().map(|b| b.get()).collect()
            } else {
                read_bases::<U32>(bytes, bases_at, n)?.iter().map(|b| u64::from(b.get())).collect()
            };
            at = bases_at + n * if wide { 8 } else { 4 };
            if ip.instance_number != 0 {
                continue;
            }
            let version = IpVersion(ip.major.into(), ip.minor.into(), ip.revision.into());
            for known in HwIp::ALL.into_iter().filter(|k| hw_id(*k) == ip.hw_id.get()) {
                ips.insert(known, IpInfo { version, bases: bases.clone() });
            }
        }
    }

    let mut harvested: BTreeMap<HwIp, Vec<u8>> = BTreeMap::new();
    let (harv_at, _) = table(TABLE_HARVEST_INFO);
    if harv_at != 0 {
        let harv: &HarvestTable = read(bytes, harv_at, "harvest_table")?;
        if harv.signature.get() == HARVEST_TABLE_SIGNATURE {
            for h in &harv.list {
                let id = h.hw_id.get();
                for ip in HwIp::ALL.into_iter().filter(|ip| id != 0 && hw_id(*ip) == id) {
                    harvested.entry(ip).or_default().push(h.number_instance);
                }
            }
        }
    }

    let (gc_at, _) = table(TABLE_GC);
    let g: &GcInfoRaw = read(bytes, gc_at, "gc_info")?;
    let version = (g.version_major.get(), g.version_minor.get());
    let (cu_per_sa, sa_per_se) = match version.0 {
        // v1: WGPs (two CUs each) per SA in two groups (Linux `amdgpu_discovery_get_gfx_info`:
        // max_cu_per_sh = 2 * (wgp0 + wgp1)).
        1 => (2 * (g.a.get() + g.b.get()), g.gc_num_sa_per_se.get()),
        2 => (g.a.get(), g.b.get()),
        v => return Err(bad(format!("gc_info version {v}.{} is not 1.x or 2.x", version.1))),
    };
    let gc = GcInfo {
        version,
        num_se: g.gc_num_se.get(),
        cu_per_sa,
        sa_per_se,
        wave_size: g.gc_wave_size.get(),
        max_waves_per_simd: g.gc_max_waves_per_simd.get(),
        max_scratch_slots_per_cu: g.gc_max_scratch_slots_per_cu.get(),
        lds_size: g.gc_lds_size.get(),
    };

    let card = card_of(&ips)?;
    Ok(Discovery { vram_size, card, ips, harvested, gc })
}

/// The card whose IP versions the table lists, with every IP pilot programs present.
fn card_of(ips: &BTreeMap<HwIp, IpInfo>) -> Result<Card, DiscoveryError> {
    let gc =
        ips.get(&HwIp::Gc).map(|i| i.version).ok_or_else(|| DiscoveryError::Bad("no GC IP in the table".into()))?;
    let card = Card::ALL.into_iter().find(|c| c.gc() == gc).ok_or_else(|| {
        DiscoveryError::Unsupported(format!(
            "GC {}.{}.{} (pilot boots GC 11.0.0 / gfx1100 and GC 12.0.1 / gfx1201)",
            gc.0, gc.1, gc.2
        ))
    })?;
    for (ip, want) in [(HwIp::Mp0, card.mp0()), (HwIp::Mp1, card.mp1()), (HwIp::Sdma0, card.sdma())] {
        let got = ips.get(&ip).map(|i| i.version);
        if got != Some(want) {
            let got = got.map_or("missing".to_string(), |v| format!("{}.{}.{}", v.0, v.1, v.2));
            return Err(DiscoveryError::Unsupported(format!(
                "{} has {} {got}, pilot's {} firmware needs {}.{}.{}",
                card.arch(),
                ip.name(),
                card.arch(),
                want.0,
                want.1,
                want.2
            )));
        }
    }
    for ip in HwIp::ALL {
        if ips.get(&ip).is_none_or(|i| i.bases.is_empty()) {
            return Err(DiscoveryError::Bad(format!("{} has no {} IP with register bases", card.arch(), ip.name())));
        }
    }
    Ok(card)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A table as Linux lays it out: binary header, IP discovery header with one die, the IPs of `card` with
    /// 32-bit bases, a harvest table and a gc_info v2.0. Checksums are filled in.
    pub(crate) fn table(card: Card) -> Vec<u8> {
        let mut t = vec![0u8; TABLE_BYTES];
        let put16 = |t: &mut Vec<u8>, at: usize, v: u16| t[at..at + 2].copy_from_slice(&v.to_le_bytes());
        let put32 = |t: &mut Vec<u8>, at: usize, v: u32| t[at..at + 4].copy_from_slice(&v.to_le_bytes());
        put32(&mut t, 0, BINARY_SIGNATURE);
        let (ih, gc, harv) = (0x100usize, 0x800usize, 0x900usize);
        put16(&mut t, 12, ih as u16);
        put16(&mut t, 12 + 8, gc as u16);
        put16(&mut t, 12 + 16, harv as u16);
        put32(&mut t, ih, DISCOVERY_TABLE_SIGNATURE);
        put16(&mut t, ih + 12, 1);
        let die = ih + 80;
        put16(&mut t, ih + 14 + 2, die as u16);
        let ips = test_ips(card);
        put16(&mut t, die + 2, ips.len() as u16);
        let mut at = die + 4;
        for (ip, v, bases) in &ips {
            put16(&mut t, at, hw_id(*ip));
            t[at + 3] = bases.len() as u8;
            t[at + 4] = v.0 as u8;
            t[at + 5] = v.1 as u8;
            t[at + 6] = v.2 as u8;
            for (i, b) in bases.iter().enumerate() {
                put32(&mut t, at + 8 + i * 4, *b);
            }
            at += 8 + bases.len() * 4;
        }
        let ih_size = at - ih;
        put16(&mut t, ih + 6, ih_size as u16);
        let sum = t[ih..at].iter().fold(0u16, |s, b| s.wrapping_add(u16::from(*b)));
        put16(&mut t, 12 + 2, sum);
        put32(&mut t, gc, 1);
        put16(&mut t, gc + 4, 2);
        for (off, v) in [(12, 6), (16, 8), (20, 2), (56, 32), (60, 16), (64, 32), (68, 64)] {
            put32(&mut t, gc + off, v);
        }
        put32(&mut t, harv, HARVEST_TABLE_SIGNATURE);
        put16(&mut t, harv + 8, hw_id(HwIp::Sdma0));
        t[harv + 10] = 1;
        let size = 0xa00usize;
        put16(&mut t, 10, size as u16);
        let sum = t[10..size].iter().fold(0u16, |s, b| s.wrapping_add(u16::from(*b)));
        put16(&mut t, 8, sum);
        t
    }

    /// Every IP pilot programs with the card's versions and made-up bases (segment i of IP k at k<<16 | i<<12).
    pub(crate) fn test_ips(card: Card) -> Vec<(HwIp, IpVersion, Vec<u32>)> {
        let other = match card {
            Card::Gfx1100 => [IpVersion(3, 0, 0), IpVersion(6, 0, 0), IpVersion(4, 3, 0), IpVersion(6, 0, 0)],
            Card::Gfx1201 => [IpVersion(4, 1, 0), IpVersion(7, 0, 0), IpVersion(6, 3, 1), IpVersion(7, 0, 0)],
        };
        let v = |ip: HwIp| match ip {
            HwIp::Gc => card.gc(),
            HwIp::Mp0 => card.mp0(),
            HwIp::Mp1 => card.mp1(),
            HwIp::Sdma0 => card.sdma(),
            HwIp::Mmhub => other[0],
            HwIp::Osssys => other[1],
            HwIp::Nbio => other[2],
            HwIp::Hdp => other[3],
        };
        HwIp::ALL
            .into_iter()
            .enumerate()
            .map(|(k, ip)| (ip, v(ip), (0..6).map(|i| ((k as u32 + 1) << 16) | (i << 12)).collect()))
            .collect()
    }

    #[test]
    fn parses_both_cards() {
        for card in Card::ALL {
            let d = parse(&table(card), 8 << 30).unwrap();
            assert_eq!(d.card, card);
            assert_eq!(d.ips[&HwIp::Gc].version, card.gc());
            assert_eq!(d.ips[&HwIp::Mp0].bases[1], (6 << 16) | (1 << 12));
            assert_eq!(d.reg_addr(HwIp::Gc, 1, 0x2047), Some((1 << 16) + (1 << 12) + 0x2047));
            assert_eq!(d.harvested.get(&HwIp::Sdma0), Some(&vec![1]));
            assert_eq!((d.gc.num_se, d.gc.cu_per_sa, d.gc.sa_per_se, d.gc.cu_count()), (6, 8, 2, 96));
            assert_eq!(d.gc.max_scratch_slots_per_cu, 32);
        }
    }

    #[test]
    fn gc_info_v1_counts_both_wgp_groups() {
        let mut t = table(Card::Gfx1100);
        let gc = 0x800;
        t[gc + 4..gc + 6].copy_from_slice(&1u16.to_le_bytes());
        for (off, v) in [(12usize, 6u32), (16, 4), (20, 1), (76, 2)] {
            t[gc + off..gc + off + 4].copy_from_slice(&v.to_le_bytes());
        }
        let sum = t[10..0xa00].iter().fold(0u16, |s, b| s.wrapping_add(u16::from(*b)));
        t[8..10].copy_from_slice(&sum.to_le_bytes());
        let d = parse(&t, 1 << 30).unwrap();
        assert_eq!((d.gc.version, d.gc.cu_per_sa, d.gc.cu_count()), ((1, 0), 10, 120));
    }

    fn message(r: Result<Discovery, DiscoveryError>) -> String {
        let m = r.expect_err("must be refused").to_string();
        assert!(!m.contains('\n'), "{m}");
        m
    }

    #[test]
    fn corrupt_and_unknown_tables_are_one_line_errors() {
        let good = table(Card::Gfx1100);
        let mut t = good.clone();
        t[0] ^= 1;
        assert!(message(parse(&t, 1 << 30)).contains("binary_signature is 0x28211406"));
        let mut t = good.clone();
        t[0x40] ^= 0x10;
        assert!(message(parse(&t, 1 << 30)).contains("binary_checksum"));
        // An IP version the cards do not have: GC 11.0.2 (gfx1102).
        let mut t = good.clone();
        let gc_entry = 0x100 + 80 + 4;
        assert_eq!(u16::from_le_bytes([t[gc_entry], t[gc_entry + 1]]), hw_id(HwIp::Gc));
        t[gc_entry + 6] = 2;
        let fix = |t: &mut Vec<u8>| {
            let ih_size = usize::from(u16::from_le_bytes([t[0x106], t[0x107]]));
            let sum = t[0x100..0x100 + ih_size].iter().fold(0u16, |s, b| s.wrapping_add(u16::from(*b)));
            t[14..16].copy_from_slice(&sum.to_le_bytes());
            let sum = t[10..0xa00].iter().fold(0u16, |s, b| s.wrapping_add(u16::from(*b)));
            t[8..10].copy_from_slice(&sum.to_le_bytes());
        };
        fix(&mut t);
        assert_eq!(
            message(parse(&t, 1 << 30)),
            "discovery: unsupported GPU: GC 11.0.2 (pilot boots GC 11.0.0 / gfx1100 and GC 12.0.1 / gfx1201)"
        );
        // The IP table's own checksum.
        let mut t = good.clone();
        t[0x100 + 80 + 12] ^= 1;
        let sum = t[10..0xa00].iter().fold(0u16, |s, b| s.wrapping_add(u16::from(*b)));
        t[8..10].copy_from_slice(&sum.to_le_bytes());
        assert!(message(parse(&t, 1 << 30)).contains("IP discovery table's checksum"));
        // A die pointing past the bytes read.
        let mut t = good;
        t[0x100 + 16..0x100 + 18].copy_from_slice(&0x2ffeu16.to_le_bytes());
        fix(&mut t);
        assert!(message(parse(&t, 1 << 30)).contains("die_header at byte 0x2ffe lies past the 0x2800 bytes read"));
    }
}
