//! The byte-range check every backend makes before touching a buffer or a mapping, and the memory sizes the
//! command's `--max-memory` options take.

use crate::device::DeviceError;

/// `offset..offset + len` does not lie within `size` bytes (or its end overflows), in operation `op`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfBounds {
    pub op: &'static str,
    pub offset: u64,
    pub len: u64,
    pub size: u64,
}

/// Checks `offset + len <= size` without overflow.
pub fn check_range(op: &'static str, offset: u64, len: u64, size: u64) -> Result<(), OutOfBounds> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(OutOfBounds { op, offset, len, size }),
    }
}

impl From<OutOfBounds> for DeviceError {
    fn from(e: OutOfBounds) -> Self {
        DeviceError::OutOfBounds { op: e.op, offset: e.offset, len: e.len, size: e.size }
    }
}

/// Parses a memory size: a number of bytes with an optional unit `K`, `M`, `G`, `T` (powers of
/// 1024, optionally followed by `iB` or `B`), e.g. `16G`, `512MiB`, `1073741824`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let shift = match unit.trim().to_ascii_uppercase().trim_end_matches("IB").trim_end_matches('B') {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(format!("bad size {text:?}: expected e.g. 16G, 512M or a number of bytes")),
    };
    match num.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 1.0 && v * ((1u64 << shift) as f64) < u64::MAX as f64 => {
            Ok((v * (1u64 << shift) as f64) as u64)
        }
        _ => Err(format!("bad size {text:?}: expected e.g. 16G, 512M or a number of bytes")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ranges_up_to_the_end_and_rejects_overflow() {
        assert_eq!(check_range("copy", 0, 16, 16), Ok(()));
        assert_eq!(check_range("copy", 16, 0, 16), Ok(()));
        assert_eq!(check_range("copy", 8, 9, 16), Err(OutOfBounds { op: "copy", offset: 8, len: 9, size: 16 }));
        assert!(check_range("copy", u64::MAX, 2, u64::MAX).is_err());
        let e: DeviceError = check_range("copy_in", 17, 0, 16).unwrap_err().into();
        assert_eq!(e.to_string(), "copy_in: range 17+0 outside buffer of 16 bytes");
    }
}
