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

/// xxh3-64 (seed 0) of `bytes`, the hash of every checksum in an artifact.
pub fn hash(bytes: &[u8]) -> u64 {
    twox_hash::XxHash3_64::oneshot(bytes)
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
    let hashes = hash_all(bytes, covered);
    for (record, (range, found)) in covered.iter().zip(hashes).enumerate() {
        let expected = u64_at(table, 24 + 8 * record);
        if expected != found {
            return Err(IntegrityError::Record { record, offset: range.start, expected, found });
        }
    }
    Ok(())
}

/// Below this many bytes the records are hashed on the calling thread.
const PARALLEL_BYTES: usize = 8 << 20;

/// The hash of every record, in order: on up to 8 threads for large artifacts (xxh3 runs at memory
/// speed on one core; a 100 MB artifact takes several milliseconds per core), records dealt out
/// largest first to the least loaded thread.
pub(crate) fn hash_all(bytes: &[u8], records: &[Range<usize>]) -> Vec<u64> {
    let total: usize = records.iter().map(|r| r.len()).sum();
    let threads = std::thread::available_parallelism().map_or(1, usize::from).min(8);
    if total < PARALLEL_BYTES || threads < 2 {
        return records.iter().map(|r| hash(&bytes[r.clone()])).collect();
    }
    let mut order: Vec<usize> = (0..records.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(records[i].len()));
    let mut shares: Vec<(usize, Vec<usize>)> = vec![(0, Vec::new()); threads];
    for i in order {
        let share = shares.iter_mut().min_by_key(|(load, _)| *load).expect("at least two threads");
        share.0 += records[i].len();
        share.1.push(i);
    }
    let mut hashes = vec![0u64; records.len()];
    std::thread::scope(|s| {
        let workers: Vec<_> = shares
            .iter()
            .map(|(_, mine)| {
                s.spawn(move || mine.iter().map(|&i| (i, hash(&bytes[records[i].clone()]))).collect::<Vec<_>>())
            })
            .collect();
        for worker in workers {
            for (i, h) in worker.join().expect("hashing does not panic") {
                hashes[i] = h;
            }
        }
    });
    hashes
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
    fn large_artifacts_are_hashed_in_parallel_with_the_same_verdicts() {
        // 40 records of 256 KiB and one of 3 MiB: more than PARALLEL_BYTES.
        let mut sizes = vec![256 << 10; 40];
        sizes.push(3 << 20);
        let mut bytes = b"pickle".to_vec();
        let mut records = Vec::new();
        for (k, &n) in sizes.iter().enumerate() {
            let start = bytes.len();
            bytes.extend((0..n).map(|i: usize| (i * 31 + k) as u8));
            records.push(start..bytes.len());
        }
        let hashes: Vec<u64> = records.iter().map(|r| hash(&bytes[r.clone()])).collect();
        assert_eq!(hash_all(&bytes, &records), hashes);
        let table = encode(hash(b"pickle"), &hashes);
        let start = bytes.len();
        bytes.extend_from_slice(&table);
        records.push(start..bytes.len());
        check(&bytes, 0..6, &records).unwrap();
        for k in [0, 17, 40] {
            let mut bad = bytes.clone();
            bad[records[k].start + 1000] ^= 4;
            let err = check(&bad, 0..6, &records).unwrap_err();
            assert!(matches!(err, IntegrityError::Record { record, .. } if record == k), "{err}");
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
