//! The integrity record: xxh3-64 of the pickle and of every other record, checked on every load.
//!
//! It is the last record of a version-2 container, written by the streaming writer after every
//! record it covers, and named by the payload (`"integrity": record`). Layout, little-endian:
//!
//! ```text
//! 8 bytes   MAGIC ("pilotxx3")
//! u64       n: the number of records before this one
//! u64       xxh3-64 of the pickle stream
//! n × u64   xxh3-64 of the data of record 0 .. n-1
//! [64 bytes  an Ed25519 signature of the file before it, see `signature`]
//! ```
//!
//! Every byte of a container is a length field, the pickle, or record data. A changed length field
//! moves record boundaries, so some record's length or hash no longer matches; a changed hash in this
//! record no longer matches its record. So a file that passes [`check`] is, up to xxh3's collision
//! rate for accidental damage, the file the writer wrote. xxh3 is not a cryptographic hash: it catches
//! corruption, not a forger (that is what a signature is for).

use std::ops::Range;

/// The first 8 bytes of an integrity record.
pub const MAGIC: [u8; 8] = *b"pilotxx3";

/// xxh3-64 of `bytes`, the hash of every checksum in an artifact.
pub fn hash(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// Why a container fails its integrity check. Display is one line naming the part at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IntegrityError {
    #[error("the last record is not an integrity record (no `pilotxx3` header): the file is damaged or was not written by this pilot")]
    Missing,
    #[error("integrity record {record}: {len} bytes, expected {expected} for {records} records")]
    BadLength { record: usize, len: usize, expected: usize, records: usize },
    #[error(
        "checksum mismatch in the pickle: the file is damaged (expected xxh3 {expected:016x}, found {found:016x})"
    )]
    Pickle { expected: u64, found: u64 },
    #[error("checksum mismatch in record {record} at offset {offset}: the file is damaged (expected xxh3 {expected:016x}, found {found:016x})")]
    Record { record: usize, offset: usize, expected: u64, found: u64 },
}

/// The contents of an integrity record covering `pickle` and `records` (their hashes, in order).
pub fn encode(pickle: u64, records: &[u64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + 8 * records.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&(records.len() as u64).to_le_bytes());
    out.extend_from_slice(&pickle.to_le_bytes());
    for h in records {
        out.extend_from_slice(&h.to_le_bytes());
    }
    out
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut le = [0; 8];
    le.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(le)
}

/// Bytes of the integrity table covering `records` records (a signature may follow it, see
/// [`super::signature`]).
pub fn table_len(records: usize) -> usize {
    24 + 8 * records
}

/// Whether the last of `records` (ranges of `bytes`) looks like an integrity record.
pub fn present(bytes: &[u8], records: &[Range<usize>]) -> bool {
    records.last().is_some_and(|r| bytes[r.clone()].starts_with(&MAGIC))
}

/// Checks the last of `records` (ranges of `bytes`, as the container parser found them) against the
/// pickle at `pickle` and every other record. Reads every byte once.
pub fn check(bytes: &[u8], pickle: Range<usize>, records: &[Range<usize>]) -> Result<(), IntegrityError> {
    let Some((last, covered)) = records.split_last() else {
        return Err(IntegrityError::Missing);
    };
    let table = &bytes[last.clone()];
    if !table.starts_with(&MAGIC) {
        return Err(IntegrityError::Missing);
    }
    let expected_len = table_len(covered.len());
    let signed_len = expected_len + super::signature::SIGNATURE_LEN;
    if (table.len() != expected_len && table.len() != signed_len) || u64_at(table, 8) != covered.len() as u64 {
        return Err(IntegrityError::BadLength {
            record: covered.len(),
            len: table.len(),
            expected: expected_len,
            records: covered.len(),
        });
    }
    let (expected, found) = (u64_at(table, 16), hash(&bytes[pickle]));
    if expected != found {
        return Err(IntegrityError::Pickle { expected, found });
    }
    for (record, range) in covered.iter().enumerate() {
        let (expected, found) = (u64_at(table, 24 + 8 * record), hash(&bytes[range.clone()]));
        if expected != found {
            return Err(IntegrityError::Record { record, offset: range.start, expected, found });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A container-like byte string: pickle at 0..4, records at 4..7 and 7..7, integrity after.
    fn sample() -> (Vec<u8>, Range<usize>, Vec<Range<usize>>) {
        let mut bytes = b"pklrec".to_vec();
        bytes.push(b'!');
        let table = encode(hash(b"pklr"), &[hash(b"ec!"), hash(b"")]);
        let start = bytes.len();
        bytes.extend_from_slice(&table);
        (bytes.clone(), 0..4, vec![4..7, 7..7, start..bytes.len()])
    }

    #[test]
    fn accepts_what_it_encoded_and_names_the_damaged_part() {
        let (bytes, pickle, records) = sample();
        assert!(present(&bytes, &records));
        check(&bytes, pickle.clone(), &records).unwrap();
        for at in 0..bytes.len() {
            for bit in 0..8 {
                let mut bad = bytes.clone();
                bad[at] ^= 1 << bit;
                let err = check(&bad, pickle.clone(), &records).unwrap_err();
                let want_variant = match at {
                    0..4 => matches!(err, IntegrityError::Pickle { .. }),
                    4..7 => matches!(err, IntegrityError::Record { record: 0, offset: 4, .. }),
                    _ => true,
                };
                assert!(want_variant, "byte {at} bit {bit}: {err}");
            }
        }
    }

    #[test]
    fn refuses_missing_and_misshapen_tables() {
        let (bytes, pickle, records) = sample();
        assert_eq!(check(&bytes, pickle.clone(), &records[..2]), Err(IntegrityError::Missing));
        assert_eq!(check(&bytes, pickle.clone(), &[]), Err(IntegrityError::Missing));
        let short = records[2].start..records[2].end - 8;
        let err = check(&bytes, pickle, &[records[0].clone(), records[1].clone(), short]).unwrap_err();
        assert!(matches!(err, IntegrityError::BadLength { len: 32, expected: 40, .. }), "{err}");
    }
}
