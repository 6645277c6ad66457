//! The simulated GPU's first registers and its IP discovery table, read the way a driver reads them
//! (tinygrad `amdev.py` `_run_discovery`): MEMSIZE at the fixed register 0xDE3, 10 KB at VRAM end - 64 KB
//! parsed as Linux `discovery.h` lays it out, with the checksums verified.

mod sim_gpu_support;
use pilot_usb_sim::Board;
use sim_gpu_support::*;
use std::collections::HashMap;

/// What a driver gets out of the table: per hardware id, its entry; and the gc_info dwords.
struct Parsed {
    ips: HashMap<u16, IpEntry>,
    gc_info: Vec<u32>,
}

fn byte_sum(b: &[u8]) -> u16 {
    b.iter().fold(0u16, |s, &x| s.wrapping_add(u16::from(x)))
}

fn parse(t: &[u8]) -> Result<Parsed, String> {
    if u32_at(t, 0) != 0x2821_1407 {
        return Err("binary signature".into());
    }
    let size = u16_at(t, 10) as usize;
    if byte_sum(&t[10..size]) != u16_at(t, 8) {
        return Err("binary checksum".into());
    }
    let table = |slot: usize| {
        let at = 12 + 8 * slot;
        (u16_at(t, at) as usize, u16_at(t, at + 2), u16_at(t, at + 4) as usize)
    };
    let (ip_off, ip_sum, ip_len) = table(0);
    if byte_sum(&t[ip_off..ip_off + ip_len]) != ip_sum {
        return Err("ip discovery checksum".into());
    }
    if u32_at(t, ip_off) != 0x5344_5049 {
        return Err("IPDS signature".into());
    }
    let wide = t[ip_off + 78] & 1 != 0;
    let mut ips = HashMap::new();
    for die in 0..u16_at(t, ip_off + 12) as usize {
        let die_off = u16_at(t, ip_off + 14 + 4 * die + 2) as usize;
        let n = u16_at(t, die_off + 2);
        let mut at = die_off + 4;
        for _ in 0..n {
            let hw = u16_at(t, at);
            let nb = t[at + 3] as usize;
            let ver = (t[at + 4], t[at + 5], t[at + 6]);
            let step = if wide { 8 } else { 4 };
            let bases = (0..nb).map(|i| u32_at(t, at + 8 + step * i)).collect();
            ips.insert(hw, (ver, bases));
            at += 8 + step * nb;
        }
    }
    let (gc_off, gc_sum, gc_len) = table(1);
    if byte_sum(&t[gc_off..gc_off + gc_len]) != gc_sum || u32_at(t, gc_off) != 0x4347 {
        return Err("gc_info".into());
    }
    let gc_info = (0..(gc_len - 12) / 4).map(|i| u32_at(t, gc_off + 12 + 4 * i)).collect();
    Ok(Parsed { ips, gc_info })
}

fn read_table(rig: &mut Rig, vram: u64) -> Vec<u8> {
    rig.vram(vram - (64 << 10), 10 << 10)
}

#[test]
fn memsize_and_discovery_table_of_both_boards() {
    for (board, gc, mp0, sdma, cus) in
        [(Board::Navi31, (11, 0, 0), (13, 0, 0), (6, 0, 0), 96), (Board::Navi48, (12, 0, 1), (14, 0, 3), (7, 0, 1), 64)]
    {
        let vram = 64 * MB;
        let mut rig = Rig::new(board, vram);
        assert_eq!(rig.rreg(0xDE3), 64, "RCC_CONFIG_MEMSIZE in MB");
        let t = read_table(&mut rig, vram);
        let p = parse(&t).unwrap();
        // GC 11, MP0 255, MP1 1, SDMA0 42, MMHUB 34, NBIF 108, HDP 41, OSSSYS 40.
        assert_eq!(p.ips[&11].0, gc);
        assert_eq!(p.ips[&255].0, mp0);
        assert_eq!(p.ips[&1].0, mp0);
        assert_eq!(p.ips[&42].0, sdma);
        for hw in [34, 108, 41, 40] {
            assert!(p.ips.contains_key(&hw), "hw id {hw} missing");
        }
        // SET_SH_REG counts from 0x2C00: GC segment 0 must put COMPUTE_PGM_LO (0x1BAC) at 0x2E0C.
        assert_eq!(p.ips[&11].1[0] + 0x1BAC, 0x2E0C);
        // NBIO segment 2 + RCC_CONFIG_MEMSIZE's offset (0xC3) is the fixed 0xDE3.
        assert_eq!(p.ips[&108].1[2] + 0xC3, 0xDE3);
        let g = &p.gc_info;
        let (se, wgp0, wgp1, sa) = (g[0], g[1], g[2], g[16]);
        assert_eq!(se * sa * (wgp0 + wgp1) * 2, cus, "{board:?} CUs");
        assert_eq!(g[11], 32, "wave size");
        assert_eq!(g[14], 64, "LDS KB");
    }
}

#[test]
fn a_corrupted_table_fails_its_checksum() {
    let vram = 16 * MB;
    let mut rig = Rig::new(Board::Navi31, vram);
    let mut t = read_table(&mut rig, vram);
    parse(&t).unwrap();
    let base_at = vram - (64 << 10) + 200;
    t[200] ^= 1;
    assert!(parse(&t).is_err(), "a flipped byte must not parse");
    // The same flip made in VRAM through BAR0 is seen by the next reader.
    let b = rig.vram(base_at, 4);
    rig.put_vram(base_at, &[b[0] ^ 1, b[1], b[2], b[3]]);
    assert!(parse(&read_table(&mut rig, vram)).is_err());
}

#[test]
fn mm_index_data_and_rsmu_reach_vram_and_registers() {
    let vram = 16 * MB;
    let mut rig = Rig::new(Board::Navi31, vram);
    let at = vram - (64 << 10);
    // MM_INDEX (0) with bit 31, MM_INDEX_HI (6), MM_DATA (1): the discovery signature.
    rig.wreg(6, (at >> 31) as u32);
    rig.wreg(0, (at as u32 & 0x7FFF_FFFF) | 0x8000_0000);
    assert_eq!(rig.rreg(1), 0x2821_1407);
    rig.wreg(1, 0xDEAD_BEEF);
    assert_eq!(u32_at(&rig.vram(at, 4), 0), 0xDEAD_BEEF);
    // RSMU index (NBIO seg 1 = 0x14) and data (0x15): a register reached indirectly is the same register.
    rig.wreg(0x14, 0xDE3 * 4);
    assert_eq!(rig.rreg(0x15), 16);
    let scratch7 = 0xA000 + 0x2047;
    rig.wreg(0x14, scratch7 * 4);
    rig.wreg(0x15, 0xA000_0008);
    assert_eq!(rig.rreg(scratch7), 0xA000_0008);
}

#[test]
fn registers_survive_closing_and_reopening_the_bridge() {
    let rig = Rig::new(Board::Navi31, 16 * MB);
    let sim = rig.sim.clone();
    let scratch6 = 0xA000 + 0x2046;
    let mut rig = rig;
    rig.wreg(scratch6, 1);
    drop(rig);
    let mut again = Rig::open(sim);
    assert_eq!(again.rreg(scratch6), 1);
}
