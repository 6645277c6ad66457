//! DPP (data-parallel primitives): a VALU instruction's src0 read from another lane of its row of 16
//! (DPP16) or group of 8 (DPP8), per the RDNA3 ISA reference, "Data Parallel Processing".

use super::decode::{Dpp, Inst};
use super::wave::{Wave, LANES};

/// The DPP16 control's source lane for `lane`, or `None` when it falls outside the row.
fn dpp16_source(ctrl: u32, lane: usize) -> Option<usize> {
    let row = lane & !15;
    let i = lane & 15;
    let n = (ctrl & 15) as usize;
    let within = |j: usize| Some(row + j);
    match ctrl {
        0x000..=0x0ff => within((i & !3) + ((ctrl >> (2 * (i & 3))) & 3) as usize),
        0x101..=0x10f => (i + n < 16).then(|| row + i + n), // row_shl: read lane i + n
        0x111..=0x11f => (i >= n).then(|| row + i - n),     // row_shr: read lane i - n
        0x121..=0x12f => within((i + 16 - n) % 16),         // row_ror
        0x140 => within(15 - i),                            // row_mirror
        0x141 => within((i & 8) + 7 - (i & 7)),             // row_half_mirror
        0x150..=0x15f => within(n),                         // row_share
        0x160..=0x16f => within(i ^ n),                     // row_xmask
        _ => None,
    }
}

/// Whether the DPP16 control is one this emulator knows (others are refused).
pub(super) fn dpp16_valid(ctrl: u32) -> bool {
    matches!(ctrl & 0x1ff, 0x000..=0x0ff | 0x101..=0x10f | 0x111..=0x11f | 0x121..=0x12f | 0x140 | 0x141 | 0x150..=0x16f)
}

/// src0's value for each lane and the lanes that write their result.
pub(super) fn gather(w: &Wave, inst: &Inst, exec: u32) -> Result<([u64; LANES], u32), String> {
    let r = (inst.src[0] - super::decode::operand::VGPR0) as usize;
    w.check_vgpr(r, 1)?;
    let reg = &w.v[r * LANES..(r + 1) * LANES];
    let mut vals = [0u64; LANES];
    let mut write = 0u32;
    match inst.dpp {
        Dpp::Dpp16(c) => {
            let ctrl = (c >> 8) & 0x1ff;
            if !dpp16_valid(ctrl) {
                return Err(format!("DPP control {ctrl:#x} is not emulated"));
            }
            let (fi, bound_zero) = (c >> 18 & 1 != 0, c >> 19 & 1 != 0);
            let (bank_mask, row_mask) = ((c >> 24) & 15, (c >> 28) & 15);
            for (lane, val) in vals.iter_mut().enumerate() {
                if exec >> lane & 1 == 0 || row_mask >> (lane / 16) & 1 == 0 || bank_mask >> ((lane & 15) / 4) & 1 == 0
                {
                    continue;
                }
                match dpp16_source(ctrl, lane).filter(|s| fi || exec >> s & 1 != 0) {
                    Some(s) => *val = reg[s] as u64,
                    // An invalid source reads 0 with BOUND_CTRL, else the lane keeps its old value.
                    None if bound_zero => *val = 0,
                    None => continue,
                }
                write |= 1 << lane;
            }
        }
        Dpp::Dpp8 { sel, fi } => {
            for (lane, val) in vals.iter_mut().enumerate() {
                if exec >> lane & 1 == 0 {
                    continue;
                }
                let s = (lane & !7) + ((sel >> (3 * (lane & 7))) & 7) as usize;
                // DPP8 without FI reads 0 from an inactive lane.
                *val = if fi || exec >> s & 1 != 0 { reg[s] as u64 } else { 0 };
                write |= 1 << lane;
            }
        }
        Dpp::None => unreachable!("gather is only called for DPP instructions"),
    }
    Ok((vals, write))
}

/// LLVM's spelling of the DPP operands.
pub(super) fn describe(dpp: Dpp) -> String {
    match dpp {
        Dpp::None => String::new(),
        Dpp::Dpp8 { sel, fi } => {
            let lanes: Vec<String> = (0..8).map(|i| ((sel >> (3 * i)) & 7).to_string()).collect();
            format!(" dpp8:[{}]{}", lanes.join(","), if fi { " fi:1" } else { "" })
        }
        Dpp::Dpp16(c) => {
            let ctrl = (c >> 8) & 0x1ff;
            let n = ctrl & 15;
            let mut s = match ctrl {
                0x000..=0x0ff => {
                    format!(" quad_perm:[{},{},{},{}]", ctrl & 3, (ctrl >> 2) & 3, (ctrl >> 4) & 3, (ctrl >> 6) & 3)
                }
                0x101..=0x10f => format!(" row_shl:{n}"),
                0x111..=0x11f => format!(" row_shr:{n}"),
                0x121..=0x12f => format!(" row_ror:{n}"),
                0x140 => " row_mirror".into(),
                0x141 => " row_half_mirror".into(),
                0x150..=0x15f => format!(" row_share:{n}"),
                0x160..=0x16f => format!(" row_xmask:{n}"),
                _ => format!(" dpp_ctrl:{ctrl:#x}"),
            };
            s += &format!(" row_mask:{:#x} bank_mask:{:#x}", (c >> 28) & 15, (c >> 24) & 15);
            if c >> 19 & 1 != 0 {
                s += " bound_ctrl:1";
            }
            if c >> 18 & 1 != 0 {
                s += " fi:1";
            }
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dpp16_sources_stay_in_their_row() {
        assert_eq!(dpp16_source(0x111, 16), None); // row_shr:1 at a row's first lane
        assert_eq!(dpp16_source(0x111, 17), Some(16));
        assert_eq!(dpp16_source(0x10f, 1), None); // row_shl:15
        assert_eq!(dpp16_source(0x121, 16), Some(31)); // row_ror:1 wraps within the row
        assert_eq!(dpp16_source(0x1b, 5), Some(6)); // quad_perm:[3,2,1,0]: lane 1 of quad 1 reads lane 2
        assert_eq!(dpp16_source(0x140, 3), Some(12));
        assert_eq!(dpp16_source(0x141, 9), Some(14));
        assert_eq!(dpp16_source(0x153, 20), Some(19));
        assert_eq!(dpp16_source(0x161, 20), Some(21));
        assert!(!dpp16_valid(0x130)); // wave shifts are gone on gfx10+
    }
}
