//! PM4 command-stream packets for Adreno a6xx: header encoding, named opcodes, registers and fields, and a strict
//! decoder.
//!
//! Encodings are those of `research/qcom.md` §2.1–§2.3 (tinygrad `pkt4_hdr`/`pkt7_hdr`/`parity`, Mesa
//! `adreno_pm4.xml`/`a6xx.xml`). The decoder accepts exactly the packets this crate emits: it rejects unknown
//! packet types and opcodes, bad parity, truncated packets, reserved header and payload bits, and payload lengths
//! other than the ones the opcode takes. Every error carries the dword offset of the offending packet header.

use std::fmt;

/// Odd parity bit over `v`: 1 when `v` has an even number of set bits, so that value plus bit has an odd count.
pub const fn parity(v: u32) -> u32 {
    let mut n = v ^ (v >> 16);
    n ^= n >> 8;
    n ^= n >> 4;
    (!0x6996u32 >> (n & 0xf)) & 1
}

/// Largest payload of a type-4 packet (7-bit count).
pub const PKT4_MAX_COUNT: usize = 0x7f;
/// Largest payload of a type-7 packet (14-bit count).
pub const PKT7_MAX_COUNT: usize = 0x3fff;
/// Largest register offset a type-4 packet can address.
pub const PKT4_MAX_REG: u32 = 0x3ffff;

/// Type-4 header: write `cnt` consecutive registers starting at `reg`.
pub const fn pkt4_hdr(reg: u32, cnt: u32) -> u32 {
    0x4000_0000 | (cnt & 0x7f) | (parity(cnt) << 7) | ((reg & 0x3ffff) << 8) | (parity(reg) << 27)
}

/// Type-7 header: opcode `op` followed by `cnt` payload dwords.
pub const fn pkt7_hdr(op: u8, cnt: u32) -> u32 {
    0x7000_0000 | (cnt & 0x3fff) | (parity(cnt) << 15) | (((op & 0x7f) as u32) << 16) | (parity(op as u32) << 23)
}

/// The type-7 opcodes this crate emits and accepts (Mesa `adreno_pm4.xml`, a6xx values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Opcode {
    WaitMemWrites = 0x12,
    WaitForIdle = 0x26,
    RunOpenCl = 0x31,
    LoadState6Geom = 0x32,
    ExecCs = 0x33,
    /// Compute (UAV) state goes through the FRAG variant.
    LoadState6Frag = 0x34,
    LoadState6 = 0x36,
    WaitRegMem = 0x3c,
    RegToMem = 0x3e,
    /// a6xx layout; on a7xx the same number is CP_EVENT_WRITE7 with another payload.
    EventWrite = 0x46,
    SetMarker = 0x65,
}

impl Opcode {
    pub const ALL: [Opcode; 11] = [
        Opcode::WaitMemWrites,
        Opcode::WaitForIdle,
        Opcode::RunOpenCl,
        Opcode::LoadState6Geom,
        Opcode::ExecCs,
        Opcode::LoadState6Frag,
        Opcode::LoadState6,
        Opcode::WaitRegMem,
        Opcode::RegToMem,
        Opcode::EventWrite,
        Opcode::SetMarker,
    ];

    pub fn from_u8(op: u8) -> Option<Opcode> {
        Opcode::ALL.iter().copied().find(|o| *o as u8 == op)
    }

    /// The Mesa name, e.g. `CP_EVENT_WRITE`.
    pub fn name(self) -> &'static str {
        match self {
            Opcode::WaitMemWrites => "CP_WAIT_MEM_WRITES",
            Opcode::WaitForIdle => "CP_WAIT_FOR_IDLE",
            Opcode::RunOpenCl => "CP_RUN_OPENCL",
            Opcode::LoadState6Geom => "CP_LOAD_STATE6_GEOM",
            Opcode::ExecCs => "CP_EXEC_CS",
            Opcode::LoadState6Frag => "CP_LOAD_STATE6_FRAG",
            Opcode::LoadState6 => "CP_LOAD_STATE6",
            Opcode::WaitRegMem => "CP_WAIT_REG_MEM",
            Opcode::RegToMem => "CP_REG_TO_MEM",
            Opcode::EventWrite => "CP_EVENT_WRITE",
            Opcode::SetMarker => "CP_SET_MARKER",
        }
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// a6xx register offsets (dword addresses) programmed for compute, with Mesa-25 names; generated from
/// `qcom/regs/a6xx.regs` (the value packers are in [`crate::a6xx`]).
pub use crate::a6xx::offset as reg;

/// CP_EVENT_WRITE event numbers and dword-0 bits.
pub mod event {
    /// Write back dirty caches, then write the 32-bit value to the address.
    pub const CACHE_FLUSH_TS: u32 = 4;
    pub const CACHE_INVALIDATE: u32 = 49;
    pub const EVENT_MASK: u32 = 0xff;
    pub const TIMESTAMP: u32 = 1 << 30;
    pub const IRQ: u32 = 1 << 31;
}

/// CP_LOAD_STATE6 dword-0 fields.
pub mod load_state {
    pub const ST_SHADER: u32 = 0;
    pub const ST_CONSTANTS: u32 = 1;
    pub const ST6_UAV: u32 = 3;
    pub const SS6_DIRECT: u32 = 0;
    pub const SS6_BINDLESS: u32 = 1;
    pub const SS6_INDIRECT: u32 = 2;
    pub const SB6_CS_TEX: u32 = 5;
    pub const SB6_CS_SHADER: u32 = 13;
    /// Largest NUM_UNIT (10 bits).
    pub const MAX_UNITS: u32 = 0x3ff;

    /// Dword 0: destination offset, state type, source, block and number of units.
    pub const fn dword0(dst_off: u32, state_type: u32, src: u32, block: u32, units: u32) -> u32 {
        (dst_off & 0x3fff)
            | ((state_type & 3) << 14)
            | ((src & 3) << 16)
            | ((block & 0xf) << 18)
            | ((units & 0x3ff) << 22)
    }
}

/// CP_WAIT_REG_MEM dword-0 fields.
pub mod wait_reg_mem {
    pub const WRITE_EQ: u32 = 3;
    pub const WRITE_GE: u32 = 5;
    pub const FUNCTION_MASK: u32 = 0x7;
    pub const SIGNED_COMPARE: u32 = 1 << 3;
    pub const POLL_MEMORY: u32 = 1 << 4;
    pub const POLL_MASK: u32 = 0x3 << 4;
    pub const WRITE_MEMORY: u32 = 1 << 8;
    pub const DWORD0_MASK: u32 = FUNCTION_MASK | SIGNED_COMPARE | POLL_MASK | WRITE_MEMORY;
}

/// CP_REG_TO_MEM dword 0: copy `cnt` registers from `reg`; `b64` marks a 64-bit destination.
pub const fn reg_to_mem_dword0(reg: u32, cnt: u32, b64: bool) -> u32 {
    (reg & 0x3ffff) | ((cnt & 0xfff) << 18) | ((b64 as u32) << 30)
}

/// CP_SET_MARKER mode for compute.
pub const RM6_COMPUTE: u32 = 8;

/// One PM4 packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Packet {
    /// Type 4: `values[i]` is written to register `reg + i`.
    Reg { reg: u32, values: Vec<u32> },
    /// Type 7: an opcode and its payload.
    Op { opcode: Opcode, payload: Vec<u32> },
}

impl Packet {
    /// Number of dwords this packet occupies, header included.
    pub fn len(&self) -> usize {
        1 + match self {
            Packet::Reg { values, .. } => values.len(),
            Packet::Op { payload, .. } => payload.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// Appends the encoded packet. Panics if the payload is too long for the header's count field: the builders
    /// never produce such packets, so this is a programming error.
    pub fn encode_into(&self, out: &mut Vec<u32>) {
        match self {
            Packet::Reg { reg, values } => {
                assert!(!values.is_empty() && values.len() <= PKT4_MAX_COUNT, "bad type-4 count {}", values.len());
                out.push(pkt4_hdr(*reg, values.len() as u32));
                out.extend_from_slice(values);
            }
            Packet::Op { opcode, payload } => {
                assert!(payload.len() <= PKT7_MAX_COUNT, "bad type-7 count {}", payload.len());
                out.push(pkt7_hdr(*opcode as u8, payload.len() as u32));
                out.extend_from_slice(payload);
            }
        }
    }
}

impl fmt::Display for Packet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex = |w: &[u32]| w.iter().map(|v| format!("{v:#x}")).collect::<Vec<_>>().join(", ");
        match self {
            Packet::Reg { reg, values } => write!(f, "reg {reg:#x} <- [{}]", hex(values)),
            Packet::Op { opcode, payload } => write!(f, "{opcode} [{}]", hex(payload)),
        }
    }
}

/// Encodes packets back to back.
pub fn encode(packets: &[Packet]) -> Vec<u32> {
    let mut out = Vec::with_capacity(packets.iter().map(Packet::len).sum());
    for p in packets {
        p.encode_into(&mut out);
    }
    out
}

/// A decode failure at dword `offset` (the header of the offending packet).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("PM4 dword {offset}: {kind}")]
pub struct DecodeError {
    pub offset: usize,
    pub kind: DecodeErrorKind,
}

/// What was wrong with a packet.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeErrorKind {
    #[error("unknown packet type in header {header:#010x}")]
    UnknownType { header: u32 },
    #[error("bad {field} parity in header {header:#010x}")]
    BadParity { header: u32, field: &'static str },
    #[error("reserved bits {bits:#010x} set in header {header:#010x}")]
    ReservedHeaderBits { header: u32, bits: u32 },
    #[error("unknown opcode {opcode:#04x} in header {header:#010x}")]
    UnknownOpcode { header: u32, opcode: u8 },
    #[error("truncated packet: header {header:#010x} announces {count} payload dwords, only {available} remain")]
    Truncated { header: u32, count: usize, available: usize },
    #[error("empty register write in header {header:#010x}")]
    EmptyRegWrite { header: u32 },
    #[error("register write {reg:#x}+{count} runs past the last register")]
    RegisterOverflow { reg: u32, count: usize },
    #[error("{opcode} takes {expected} payload dwords, got {got}")]
    PayloadLength { opcode: Opcode, expected: &'static str, got: usize },
    #[error("{opcode} payload dword {index} = {value:#010x} sets reserved bits {bits:#010x}")]
    ReservedPayloadBits { opcode: Opcode, index: usize, value: u32, bits: u32 },
    #[error("{opcode}: {what}")]
    BadField { opcode: Opcode, what: String },
}

/// Iterates over the packets of a stream, yielding each with the dword offset of its header; stops after the first
/// error.
pub struct PacketIter<'a> {
    words: &'a [u32],
    pos: usize,
    failed: bool,
}

impl<'a> PacketIter<'a> {
    pub fn new(words: &'a [u32]) -> Self {
        PacketIter { words, pos: 0, failed: false }
    }
}

impl Iterator for PacketIter<'_> {
    type Item = Result<(usize, Packet), DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.words.len() {
            return None;
        }
        let offset = self.pos;
        match decode_one(&self.words[offset..]) {
            Ok(p) => {
                self.pos += p.len();
                Some(Ok((offset, p)))
            }
            Err(kind) => {
                self.failed = true;
                Some(Err(DecodeError { offset, kind }))
            }
        }
    }
}

/// Decodes a whole stream.
pub fn decode(words: &[u32]) -> Result<Vec<Packet>, DecodeError> {
    PacketIter::new(words).map(|r| r.map(|(_, p)| p)).collect()
}

/// Decodes a whole stream, keeping the dword offset of every packet header.
pub fn decode_with_offsets(words: &[u32]) -> Result<Vec<(usize, Packet)>, DecodeError> {
    PacketIter::new(words).collect()
}

fn payload(words: &[u32], header: u32, count: usize) -> Result<Vec<u32>, DecodeErrorKind> {
    let available = words.len() - 1;
    if count > available {
        return Err(DecodeErrorKind::Truncated { header, count, available });
    }
    Ok(words[1..=count].to_vec())
}

fn decode_one(words: &[u32]) -> Result<Packet, DecodeErrorKind> {
    let header = words[0];
    match header >> 28 {
        4 => {
            let reserved = header & (1 << 26);
            if reserved != 0 {
                return Err(DecodeErrorKind::ReservedHeaderBits { header, bits: reserved });
            }
            let count = header & 0x7f;
            let reg = (header >> 8) & 0x3ffff;
            if (header >> 7) & 1 != parity(count) {
                return Err(DecodeErrorKind::BadParity { header, field: "count" });
            }
            if (header >> 27) & 1 != parity(reg) {
                return Err(DecodeErrorKind::BadParity { header, field: "register" });
            }
            if count == 0 {
                return Err(DecodeErrorKind::EmptyRegWrite { header });
            }
            if reg + count - 1 > PKT4_MAX_REG {
                return Err(DecodeErrorKind::RegisterOverflow { reg, count: count as usize });
            }
            Ok(Packet::Reg { reg, values: payload(words, header, count as usize)? })
        }
        7 => {
            let reserved = header & (0x0f00_0000 | 1 << 14);
            if reserved != 0 {
                return Err(DecodeErrorKind::ReservedHeaderBits { header, bits: reserved });
            }
            let count = header & 0x3fff;
            let op = ((header >> 16) & 0x7f) as u8;
            if (header >> 15) & 1 != parity(count) {
                return Err(DecodeErrorKind::BadParity { header, field: "count" });
            }
            if (header >> 23) & 1 != parity(op as u32) {
                return Err(DecodeErrorKind::BadParity { header, field: "opcode" });
            }
            let opcode = Opcode::from_u8(op).ok_or(DecodeErrorKind::UnknownOpcode { header, opcode: op })?;
            let payload = payload(words, header, count as usize)?;
            check_payload(opcode, &payload)?;
            Ok(Packet::Op { opcode, payload })
        }
        _ => Err(DecodeErrorKind::UnknownType { header }),
    }
}

fn check_len(opcode: Opcode, p: &[u32], ok: bool, expected: &'static str) -> Result<(), DecodeErrorKind> {
    if ok {
        Ok(())
    } else {
        Err(DecodeErrorKind::PayloadLength { opcode, expected, got: p.len() })
    }
}

fn check_reserved(opcode: Opcode, p: &[u32], index: usize, allowed: u32) -> Result<(), DecodeErrorKind> {
    let bits = p[index] & !allowed;
    if bits != 0 {
        return Err(DecodeErrorKind::ReservedPayloadBits { opcode, index, value: p[index], bits });
    }
    Ok(())
}

/// Checks the payload of a type-7 packet against the layouts in qcom.md §2.2.
pub fn check_payload(opcode: Opcode, p: &[u32]) -> Result<(), DecodeErrorKind> {
    let bad = |what: String| Err(DecodeErrorKind::BadField { opcode, what });
    match opcode {
        Opcode::WaitMemWrites | Opcode::WaitForIdle => check_len(opcode, p, p.is_empty(), "0"),
        Opcode::RunOpenCl | Opcode::SetMarker => check_len(opcode, p, p.len() == 1, "1"),
        Opcode::ExecCs => {
            check_len(opcode, p, p.len() == 4, "4")?;
            check_reserved(opcode, p, 0, 0)
        }
        Opcode::LoadState6 | Opcode::LoadState6Geom | Opcode::LoadState6Frag => {
            check_len(opcode, p, p.len() == 3, "3")?;
            let src = (p[0] >> 16) & 3;
            if src != load_state::SS6_INDIRECT {
                return bad(format!("state source {src} is not SS6_INDIRECT"));
            }
            if p[0] >> 22 == 0 {
                return bad("NUM_UNIT is 0".into());
            }
            check_reserved(opcode, p, 2, 0x0001_ffff)
        }
        Opcode::WaitRegMem => {
            check_len(opcode, p, p.len() == 6, "6")?;
            check_reserved(opcode, p, 0, wait_reg_mem::DWORD0_MASK)?;
            check_reserved(opcode, p, 2, 0x0001_ffff)
        }
        Opcode::RegToMem => {
            check_len(opcode, p, p.len() == 3, "3")?;
            check_reserved(opcode, p, 2, 0x0001_ffff)
        }
        Opcode::EventWrite => {
            check_len(opcode, p, p.len() == 1 || p.len() == 4, "1 or 4")?;
            check_reserved(opcode, p, 0, event::EVENT_MASK | event::TIMESTAMP | event::IRQ)?;
            let ev = p[0] & event::EVENT_MASK;
            match ev {
                event::CACHE_FLUSH_TS => check_len(opcode, p, p.len() == 4, "4 for CACHE_FLUSH_TS")?,
                event::CACHE_INVALIDATE => check_len(opcode, p, p.len() == 1, "1 for CACHE_INVALIDATE")?,
                _ => return bad(format!("unknown event {ev}")),
            }
            if p.len() == 4 {
                check_reserved(opcode, p, 2, 0x0001_ffff)?;
            }
            Ok(())
        }
    }
}

/// Joins the lo/hi dwords of a GPU address.
pub const fn addr64(lo: u32, hi: u32) -> u64 {
    (hi as u64) << 32 | lo as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parity_is_odd() {
        for v in [0u32, 1, 2, 3, 0x26, 0x46, 0xffff_ffff, 0x8000_0001, 0xb990] {
            assert_eq!((v.count_ones() + parity(v)) % 2, 1, "{v:#x}");
        }
    }

    #[test]
    fn pkt7_vectors_from_the_fact_sheet() {
        let cases: [(Opcode, u32, u32); 10] = [
            (Opcode::WaitForIdle, 0, 0x70268000),
            (Opcode::SetMarker, 1, 0x70e50001),
            (Opcode::EventWrite, 4, 0x70460004),
            (Opcode::EventWrite, 1, 0x70460001),
            (Opcode::WaitMemWrites, 0, 0x70928000),
            (Opcode::RegToMem, 3, 0x703e8003),
            (Opcode::WaitRegMem, 6, 0x70bc8006),
            (Opcode::LoadState6Frag, 3, 0x70348003),
            (Opcode::RunOpenCl, 1, 0x70310001),
            (Opcode::ExecCs, 4, 0x70b30004),
        ];
        for (op, cnt, want) in cases {
            assert_eq!(pkt7_hdr(op as u8, cnt), want, "{op}/{cnt}");
        }
    }

    #[test]
    fn pkt4_vectors_from_the_fact_sheet() {
        let cases = [
            (0xb990, 12, 0x40b9908c),
            (0xa9b0, 10, 0x40a9b08a),
            (0xb983, 5, 0x48b98385),
            (0xaa00, 1, 0x48aa0001),
            (0xbb08, 1, 0x40bb0801),
            (0xa9bb, 1, 0x48a9bb01),
        ];
        for (reg, cnt, want) in cases {
            assert_eq!(pkt4_hdr(reg, cnt), want, "{reg:#x}/{cnt}");
        }
    }

    #[test]
    fn load_state_and_reg_to_mem_fields() {
        use load_state::*;
        assert_eq!(dword0(0, ST_CONSTANTS, SS6_INDIRECT, SB6_CS_SHADER, 256), 0x40364000);
        assert_eq!(dword0(0, ST_SHADER, SS6_INDIRECT, SB6_CS_SHADER, 6), 0x01b60000);
        assert_eq!(dword0(0, ST_SHADER, SS6_INDIRECT, SB6_CS_TEX, 2), 0x00960000);
        assert_eq!(reg_to_mem_dword0(reg::CP_ALWAYS_ON_COUNTER, 2, true), 0x40080980);
    }

    fn err(words: &[u32]) -> String {
        decode(words).unwrap_err().to_string()
    }

    #[test]
    fn decodes_a_small_stream() {
        let words = [0x70268000, 0x40bb0801, 0x60, 0x70460001, 49];
        let got = decode_with_offsets(&words).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[1], (1, Packet::Reg { reg: 0xbb08, values: vec![0x60] }));
        assert_eq!(got[2], (3, Packet::Op { opcode: Opcode::EventWrite, payload: vec![49] }));
        assert_eq!(encode(&decode(&words).unwrap()), words);
    }

    #[test]
    fn rejects_flipped_parity() {
        assert_eq!(err(&[0x70268000, 0x70268000 ^ (1 << 15)]), "PM4 dword 1: bad count parity in header 0x70260000");
        assert_eq!(err(&[0x70268000 ^ (1 << 23)]), "PM4 dword 0: bad opcode parity in header 0x70a68000");
        assert_eq!(err(&[0x40bb0801 ^ (1 << 27), 0]), "PM4 dword 0: bad register parity in header 0x48bb0801");
        assert_eq!(err(&[0x40bb0801 ^ (1 << 7), 0]), "PM4 dword 0: bad count parity in header 0x40bb0881");
    }

    #[test]
    fn rejects_truncated_packets() {
        assert_eq!(
            err(&[0x70268000, 0x70460004, 4, 0]),
            "PM4 dword 1: truncated packet: header 0x70460004 announces 4 payload dwords, only 2 remain"
        );
        assert_eq!(
            err(&[0x40b9908c, 1, 2]),
            "PM4 dword 0: truncated packet: header 0x40b9908c announces 12 payload dwords, only 2 remain"
        );
    }

    #[test]
    fn rejects_unknown_opcodes_and_types() {
        assert_eq!(err(&[pkt7_hdr(0x7f, 0)]), "PM4 dword 0: unknown opcode 0x7f in header 0x707f8000");
        assert_eq!(err(&[0x70268000, 0x12345678]), "PM4 dword 1: unknown packet type in header 0x12345678");
    }

    #[test]
    fn rejects_reserved_bits() {
        assert_eq!(err(&[0x70268000 | (1 << 14)]), "PM4 dword 0: reserved bits 0x00004000 set in header 0x7026c000");
        assert_eq!(err(&[0x71268000]), "PM4 dword 0: reserved bits 0x01000000 set in header 0x71268000");
        assert_eq!(err(&[0x40bb0801 | (1 << 26), 0]), "PM4 dword 0: reserved bits 0x04000000 set in header 0x44bb0801");
        assert_eq!(
            err(&[pkt7_hdr(Opcode::WaitRegMem as u8, 6), 0x15 | 0x40, 0, 0, 0, 0, 0]),
            "PM4 dword 0: CP_WAIT_REG_MEM payload dword 0 = 0x00000055 sets reserved bits 0x00000040"
        );
        assert_eq!(
            err(&[pkt7_hdr(Opcode::EventWrite as u8, 1), 49 | 0x100]),
            "PM4 dword 0: CP_EVENT_WRITE payload dword 0 = 0x00000131 sets reserved bits 0x00000100"
        );
    }

    #[test]
    fn rejects_bad_payloads() {
        assert_eq!(
            err(&[pkt7_hdr(Opcode::ExecCs as u8, 3), 0, 1, 1]),
            "PM4 dword 0: CP_EXEC_CS takes 4 payload dwords, got 3"
        );
        assert_eq!(
            err(&[pkt7_hdr(Opcode::EventWrite as u8, 1), 4]),
            "PM4 dword 0: CP_EVENT_WRITE takes 4 for CACHE_FLUSH_TS payload dwords, got 1"
        );
        assert_eq!(err(&[pkt7_hdr(Opcode::EventWrite as u8, 1), 7]), "PM4 dword 0: CP_EVENT_WRITE: unknown event 7");
        assert_eq!(
            err(&[pkt7_hdr(Opcode::LoadState6Frag as u8, 3), 0x40344000, 0, 0]),
            "PM4 dword 0: CP_LOAD_STATE6_FRAG: state source 0 is not SS6_INDIRECT"
        );
        assert_eq!(err(&[pkt4_hdr(0x100, 0)]), "PM4 dword 0: empty register write in header 0x40010080");
    }

    fn arb_packet() -> impl Strategy<Value = Packet> {
        let reg = (0u32..0x3_0000, prop::collection::vec(any::<u32>(), 1..=PKT4_MAX_COUNT))
            .prop_map(|(reg, values)| Packet::Reg { reg, values });
        let addr = || (any::<u32>(), 0u32..0x2_0000);
        let op = prop_oneof![
            Just(Packet::Op { opcode: Opcode::WaitForIdle, payload: vec![] }),
            Just(Packet::Op { opcode: Opcode::WaitMemWrites, payload: vec![] }),
            any::<u32>().prop_map(|v| Packet::Op { opcode: Opcode::SetMarker, payload: vec![v] }),
            any::<u32>().prop_map(|v| Packet::Op { opcode: Opcode::RunOpenCl, payload: vec![v] }),
            (any::<u32>(), any::<u32>(), any::<u32>())
                .prop_map(|(x, y, z)| Packet::Op { opcode: Opcode::ExecCs, payload: vec![0, x, y, z] }),
            (0u32..4, 0u32..16, 1u32..0x400, 0u32..0x4000, addr()).prop_map(|(st, sb, n, dst, (lo, hi))| {
                let d0 = load_state::dword0(dst, st, load_state::SS6_INDIRECT, sb, n);
                Packet::Op { opcode: Opcode::LoadState6Frag, payload: vec![d0, lo, hi] }
            }),
            (0u32..0x140, addr(), any::<u32>(), any::<u32>(), any::<u32>()).prop_map(|(d0, (lo, hi), r, m, d)| {
                let d0 = d0 & wait_reg_mem::DWORD0_MASK;
                Packet::Op { opcode: Opcode::WaitRegMem, payload: vec![d0, lo, hi, r, m, d] }
            }),
            (any::<u32>(), addr())
                .prop_map(|(d0, (lo, hi))| Packet::Op { opcode: Opcode::RegToMem, payload: vec![d0, lo, hi] }),
            (addr(), any::<u32>()).prop_map(|((lo, hi), v)| Packet::Op {
                opcode: Opcode::EventWrite,
                payload: vec![event::CACHE_FLUSH_TS, lo, hi, v]
            }),
            Just(Packet::Op { opcode: Opcode::EventWrite, payload: vec![event::CACHE_INVALIDATE] }),
        ];
        prop_oneof![reg, op]
    }

    proptest! {
        #[test]
        fn decode_inverts_encode(packets in prop::collection::vec(arb_packet(), 0..24)) {
            let words = encode(&packets);
            prop_assert_eq!(decode(&words).unwrap(), packets);
        }

        #[test]
        fn any_single_header_bit_flip_is_caught_or_changes_the_packet(
            packets in prop::collection::vec(arb_packet(), 1..8), which in any::<prop::sample::Index>(), bit in 0u32..32
        ) {
            let mut words = encode(&packets);
            let headers: Vec<usize> = decode_with_offsets(&words).unwrap().into_iter().map(|(o, _)| o).collect();
            let at = headers[which.index(headers.len())];
            words[at] ^= 1 << bit;
            // Every header bit is covered by a parity bit, the reserved masks or the packet type.
            let e = decode(&words).unwrap_err();
            prop_assert_eq!(e.offset, at, "{}", e);
        }
    }
}
