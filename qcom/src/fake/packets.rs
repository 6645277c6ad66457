//! The fake command processor's own PM4 decoder (type-4 register writes and type-7 opcodes, a6xx header layout as
//! in Mesa's `adreno_pm4.xml` and tinygrad's `pkt4_hdr`/`pkt7_hdr`), on the fake's own opcode table
//! ([`super::regs::OPCODES`]): it shares no code with the encoder's `crate::pm4`.

use super::cp::StreamError;
use super::regs::OPCODES;

/// One decoded packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Packet {
    /// Type 4: `values[i]` goes to register `reg + i`.
    Regs { reg: u32, values: Vec<u32> },
    /// Type 7: an opcode (from the fake's table) and its payload.
    Op { opcode: u32, name: &'static str, payload: Vec<u32> },
}

/// 1 when `v` has an even number of set bits (the header parity bits make the count odd).
fn odd_parity_bit(v: u32) -> u32 {
    (v.count_ones() + 1) % 2
}

/// Decodes a whole command object, keeping each packet's dword offset; errors name the offending header's offset.
pub(super) fn decode(words: &[u32]) -> Result<Vec<(usize, Packet)>, StreamError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < words.len() {
        let h = words[at];
        let err = |what: String| StreamError { offset: at, what };
        // The payload length, and the packet without its payload.
        let (count, head) = match h >> 28 {
            4 => {
                let (count, reg) = (h & 0x7f, (h >> 8) & 0x3ffff);
                if h & (1 << 26) != 0 {
                    return Err(err(format!("type-4 header {h:#010x} sets reserved bit 26")));
                }
                if (h >> 7) & 1 != odd_parity_bit(count) || (h >> 27) & 1 != odd_parity_bit(reg) {
                    return Err(err(format!("type-4 header {h:#010x} has a bad parity bit")));
                }
                if count == 0 {
                    return Err(err(format!("type-4 header {h:#010x} writes no register")));
                }
                (count as usize, Packet::Regs { reg, values: Vec::new() })
            }
            7 => {
                let (count, op) = (h & 0x3fff, (h >> 16) & 0x7f);
                if h & (0x0f00_0000 | 1 << 14) != 0 {
                    return Err(err(format!("type-7 header {h:#010x} sets reserved bits")));
                }
                if (h >> 15) & 1 != odd_parity_bit(count) || (h >> 23) & 1 != odd_parity_bit(op) {
                    return Err(err(format!("type-7 header {h:#010x} has a bad parity bit")));
                }
                let Some(&(opcode, name, lens)) = OPCODES.iter().find(|(o, _, _)| *o == op) else {
                    return Err(err(format!("opcode {op:#04x} (header {h:#010x}) is not one the fake knows")));
                };
                if !lens.contains(&(count as usize)) {
                    return Err(err(format!("{name} with {count} payload dwords (it takes {lens:?})")));
                }
                (count as usize, Packet::Op { opcode, name, payload: Vec::new() })
            }
            _ => return Err(err(format!("header {h:#010x} is neither a type-4 nor a type-7 packet"))),
        };
        let Some(payload) = words.get(at + 1..at + 1 + count) else {
            return Err(err(format!(
                "header {h:#010x} announces {count} payload dwords, only {} remain",
                words.len() - at - 1
            )));
        };
        let packet = match head {
            Packet::Regs { reg, .. } => Packet::Regs { reg, values: payload.to_vec() },
            Packet::Op { opcode, name, .. } => Packet::Op { opcode, name, payload: payload.to_vec() },
        };
        out.push((at, packet));
        at += 1 + count;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_tinygrads_worked_example_headers() {
        // Headers from tinygrad's QCOMComputeQueue (pkt7 WAIT_FOR_IDLE, pkt4 SP_UPDATE_CNTL, pkt7 EVENT_WRITE).
        let words = [0x7026_8000, 0x40bb_0801, 0x60, 0x7046_0001, 49];
        let got = decode(&words).unwrap();
        assert_eq!(got[1], (1, Packet::Regs { reg: 0xbb08, values: vec![0x60] }));
        assert_eq!(got[2], (3, Packet::Op { opcode: 0x46, name: "CP_EVENT_WRITE", payload: vec![49] }));
        let bad = |w: &[u32]| decode(w).unwrap_err().to_string();
        assert_eq!(bad(&[0x7026_8000 ^ (1 << 15)]), "PM4 dword 0: type-7 header 0x70260000 has a bad parity bit");
        assert_eq!(
            bad(&[0x7026_8000, 0x40b9_908c, 1]),
            "PM4 dword 1: header 0x40b9908c announces 12 payload dwords, only 1 remain"
        );
        assert_eq!(bad(&[0x707f_8000]), "PM4 dword 0: opcode 0x7f (header 0x707f8000) is not one the fake knows");
        assert_eq!(bad(&[0x7046_0002, 0, 0]), "PM4 dword 0: CP_EVENT_WRITE with 2 payload dwords (it takes [1, 4])");
    }
}
