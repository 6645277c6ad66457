//! The out-of-band container openpilot and tinygrad write with `PICKLE_OOB=1` (tinygrad
//! `examples/openpilot/compile3.py`, `dump_pickle`/`load_pickle`, copied from openpilot's modeld helpers):
//!
//! ```text
//! int64 LE  N        length of the pickle stream
//! N bytes            the pickle
//! repeat until EOF:
//!   int64 LE  n      length of the next out-of-band buffer
//!   n bytes          its contents, in the order the pickle's NEXT_BUFFER opcodes meet them
//! ```
//!
//! The framing has no magic, count or checksum, and lengths are signed. [`parse`] reads it from
//! untrusted bytes (normally a memory map); [`write`] streams one atomically to disk, ending it with
//! an [`integrity`] record when asked ([`Record::Integrity`]).

use std::fs::File;
use std::hash::Hasher;
use std::io::{self, BufWriter, Write};
use std::ops::Range;
use std::path::Path;

use twox_hash::XxHash3_64;

use super::integrity;

/// The alignment [`Record::Pad`] gives the data of the record after it, in file offsets.
pub const ALIGN: u64 = 64;

/// Where the parts of a container lie in its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Container {
    /// The pickle stream.
    pub pickle: Range<usize>,
    /// The data of each record (without its 8-byte length), in file order.
    pub records: Vec<Range<usize>>,
}

/// Why bytes are not a container. Display is one line, `offset N: reason`, N being the file offset
/// of the length field at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ContainerError {
    #[error("offset 0: the file is empty")]
    Empty,
    #[error("offset 0: truncated header: {len} bytes, the pickle length needs 8")]
    TruncatedHeader { len: usize },
    #[error("offset 0: negative pickle length {len}")]
    NegativePickleLength { len: i64 },
    #[error("offset 0: pickle length {len} exceeds the {available} bytes after the header")]
    OversizedPickle { len: i64, available: usize },
    #[error("offset {offset}: truncated record header: {left} bytes left, a record length needs 8")]
    TruncatedRecordHeader { offset: usize, left: usize },
    #[error("offset {offset}: record {record} has negative length {len}")]
    NegativeRecordLength { offset: usize, record: usize, len: i64 },
    #[error("offset {offset}: record {record} of {len} bytes is longer than the {available} bytes left")]
    RecordTooLong { offset: usize, record: usize, len: i64, available: usize },
}

impl ContainerError {
    /// The file offset of the length field at fault.
    pub fn offset(&self) -> usize {
        match self {
            ContainerError::Empty
            | ContainerError::TruncatedHeader { .. }
            | ContainerError::NegativePickleLength { .. }
            | ContainerError::OversizedPickle { .. } => 0,
            ContainerError::TruncatedRecordHeader { offset, .. }
            | ContainerError::NegativeRecordLength { offset, .. }
            | ContainerError::RecordTooLong { offset, .. } => *offset,
        }
    }
}

fn i64_at(bytes: &[u8], offset: usize) -> i64 {
    let mut le = [0; 8];
    le.copy_from_slice(&bytes[offset..offset + 8]);
    i64::from_le_bytes(le)
}

/// Splits container bytes into the pickle and the records. Every length is checked against the
/// bytes that remain; the record list grows only with records actually present.
pub fn parse(bytes: &[u8]) -> Result<Container, ContainerError> {
    if bytes.is_empty() {
        return Err(ContainerError::Empty);
    }
    if bytes.len() < 8 {
        return Err(ContainerError::TruncatedHeader { len: bytes.len() });
    }
    let len = i64_at(bytes, 0);
    let available = bytes.len() - 8;
    let n = match usize::try_from(len) {
        Ok(n) if n <= available => n,
        Ok(_) => return Err(ContainerError::OversizedPickle { len, available }),
        Err(_) if len < 0 => return Err(ContainerError::NegativePickleLength { len }),
        Err(_) => return Err(ContainerError::OversizedPickle { len, available }),
    };
    let pickle = 8..8 + n;
    let mut records = Vec::new();
    let mut offset = pickle.end;
    while offset < bytes.len() {
        let left = bytes.len() - offset;
        if left < 8 {
            return Err(ContainerError::TruncatedRecordHeader { offset, left });
        }
        let len = i64_at(bytes, offset);
        let record = records.len();
        let available = left - 8;
        let n = match usize::try_from(len) {
            Ok(n) if n <= available => n,
            _ if len < 0 => return Err(ContainerError::NegativeRecordLength { offset, record, len }),
            _ => return Err(ContainerError::RecordTooLong { offset, record, len, available }),
        };
        records.push(offset + 8..offset + 8 + n);
        offset += 8 + n;
    }
    Ok(Container { pickle, records })
}

/// Bytes that can stream themselves into a container record.
pub trait BlobSource {
    /// The exact number of bytes [`BlobSource::write_to`] writes.
    fn len(&self) -> u64;

    /// Whether the blob is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the blob's bytes, exactly [`BlobSource::len`] of them.
    fn write_to(&self, w: &mut dyn Write) -> io::Result<()>;
}

impl BlobSource for [u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }

    fn write_to(&self, w: &mut dyn Write) -> io::Result<()> {
        w.write_all(self)
    }
}

impl BlobSource for std::borrow::Cow<'_, [u8]> {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }

    fn write_to(&self, w: &mut dyn Write) -> io::Result<()> {
        w.write_all(self)
    }
}

impl BlobSource for Vec<u8> {
    fn len(&self) -> u64 {
        Vec::len(self) as u64
    }

    fn write_to(&self, w: &mut dyn Write) -> io::Result<()> {
        w.write_all(self)
    }
}

impl<T: BlobSource + ?Sized> BlobSource for &T {
    fn len(&self) -> u64 {
        (**self).len()
    }

    fn write_to(&self, w: &mut dyn Write) -> io::Result<()> {
        (**self).write_to(w)
    }
}

/// One record of a container being written.
#[derive(Clone, Copy)]
pub enum Record<'a> {
    /// Zeros (0 to 63 bytes) sized so that the next record's data starts at a multiple of [`ALIGN`].
    Pad,
    /// A blob, streamed from its source.
    Data(&'a dyn BlobSource),
    /// The [`integrity`] record: the hashes of the pickle and of every record before it, computed
    /// while they streamed. Only valid as the last record.
    Integrity,
}

/// The size of a pad record whose length field is at `offset`: the data of the record after it,
/// behind the pad's data and that record's length field, lands on a multiple of [`ALIGN`].
pub fn pad_len(offset: u64) -> u64 {
    (ALIGN - (offset + 16) % ALIGN) % ALIGN
}

/// Counts and hashes what passes through and refuses to write past `limit`.
struct Limited<'w, W: Write> {
    inner: &'w mut W,
    written: u64,
    limit: u64,
    hasher: XxHash3_64,
}

impl<W: Write> Write for Limited<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.len() as u64 > self.limit - self.written {
            return Err(blob_len_error(self.limit, "more"));
        }
        let n = self.inner.write(buf)?;
        self.hasher.write(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn blob_len_error(len: u64, what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("a blob of declared length {len} wrote {what} bytes than that"))
}

fn len_field(len: u64) -> io::Result<[u8; 8]> {
    match i64::try_from(len) {
        Ok(n) => Ok(n.to_le_bytes()),
        Err(_) => {
            Err(io::Error::new(io::ErrorKind::InvalidInput, format!("length {len} does not fit the container's int64")))
        }
    }
}

/// Writes a container to `path` atomically: to a temporary file in the same directory, through a
/// buffer, each blob streamed by [`BlobSource::write_to`] (peak memory about one write buffer),
/// then fsync and rename over `path`. On any error the temporary file is removed and an existing
/// file at `path` is untouched. A blob that writes other than [`BlobSource::len`] bytes is an
/// [`io::ErrorKind::InvalidData`] error. The new file keeps an existing file's permissions, else
/// gets 0o644. Only regular files are written: a symlink is written through (its target replaced,
/// the link kept), and a device node, FIFO, socket or directory is refused (see
/// [`crate::fsio::output_target`]). The temporary file is removed if a signal kills the process
/// (see [`crate::fsio::install_signal_cleanup`]).
/// A [`Record::Integrity`] anywhere but last is an [`io::ErrorKind::InvalidInput`] error.
pub fn write(path: &Path, pickle: &[u8], records: &[Record]) -> io::Result<()> {
    let path = &crate::fsio::output_target(path)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if let Some(k) = records.iter().position(|r| matches!(r, Record::Integrity)) {
        if k + 1 != records.len() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "the integrity record must be the last record"));
        }
    }
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    let _registered = crate::fsio::remove_on_signal(tmp.path());
    {
        let mut w = BufWriter::with_capacity(1 << 20, tmp.as_file_mut());
        w.write_all(&len_field(pickle.len() as u64)?)?;
        w.write_all(pickle)?;
        let mut offset = 8 + pickle.len() as u64;
        let mut hashes = Vec::with_capacity(records.len());
        for record in records {
            match record {
                Record::Pad => {
                    let n = pad_len(offset);
                    let zeros = &[0; ALIGN as usize][..n as usize];
                    w.write_all(&len_field(n)?)?;
                    w.write_all(zeros)?;
                    hashes.push(integrity::hash(zeros));
                    offset += 8 + n;
                }
                Record::Data(blob) => {
                    let len = blob.len();
                    w.write_all(&len_field(len)?)?;
                    let mut limited = Limited { inner: &mut w, written: 0, limit: len, hasher: XxHash3_64::new() };
                    blob.write_to(&mut limited)?;
                    if limited.written != len {
                        return Err(blob_len_error(len, "fewer"));
                    }
                    hashes.push(limited.hasher.finish());
                    offset += 8 + len;
                }
                Record::Integrity => {
                    let table = integrity::encode(integrity::hash(pickle), &hashes);
                    w.write_all(&len_field(table.len() as u64)?)?;
                    w.write_all(&table)?;
                    offset += 8 + table.len() as u64;
                }
            }
        }
        w.flush()?;
    }
    set_permissions(tmp.as_file(), path)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    // Best effort: makes the rename itself durable.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(unix)]
fn set_permissions(file: &File, path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let perms = match std::fs::metadata(path) {
        Ok(m) => m.permissions(),
        Err(_) => std::fs::Permissions::from_mode(0o644),
    };
    file.set_permissions(perms)
}

#[cfg(not(unix))]
fn set_permissions(_file: &File, _path: &Path) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn container(pickle: &[u8], records: &[&[u8]]) -> Vec<u8> {
        let mut out = (pickle.len() as i64).to_le_bytes().to_vec();
        out.extend_from_slice(pickle);
        for r in records {
            out.extend_from_slice(&(r.len() as i64).to_le_bytes());
            out.extend_from_slice(r);
        }
        out
    }

    #[test]
    fn parses_pickle_and_records() {
        let bytes = container(b"abc", &[b"hello", b"", b"xy"]);
        let c = parse(&bytes).unwrap();
        assert_eq!(&bytes[c.pickle.clone()], b"abc");
        let got: Vec<&[u8]> = c.records.iter().map(|r| &bytes[r.clone()]).collect();
        assert_eq!(got, vec![&b"hello"[..], b"", b"xy"]);
        let c = parse(&container(b"", &[])).unwrap();
        assert_eq!((c.pickle, c.records.len()), (8..8, 0));
    }

    #[test]
    fn errors_name_the_offset() {
        let cases: Vec<(Vec<u8>, ContainerError)> = vec![
            (vec![], ContainerError::Empty),
            (vec![1, 0, 0], ContainerError::TruncatedHeader { len: 3 }),
            ((-1i64).to_le_bytes().to_vec(), ContainerError::NegativePickleLength { len: -1 }),
            (container(b"ab", &[])[..9].to_vec(), ContainerError::OversizedPickle { len: 2, available: 1 }),
            (
                [&container(b"ab", &[])[..], &[1, 2, 3]].concat(),
                ContainerError::TruncatedRecordHeader { offset: 10, left: 3 },
            ),
            (
                [&container(b"ab", &[b"q"])[..], &i64::MIN.to_le_bytes()].concat(),
                ContainerError::NegativeRecordLength { offset: 19, record: 1, len: i64::MIN },
            ),
            (
                [&container(b"ab", &[])[..], &i64::MAX.to_le_bytes(), b"x"].concat(),
                ContainerError::RecordTooLong { offset: 10, record: 0, len: i64::MAX, available: 1 },
            ),
        ];
        for (bytes, want) in cases {
            let got = parse(&bytes).unwrap_err();
            assert_eq!(got, want);
            assert!(got.to_string().starts_with(&format!("offset {}: ", got.offset())), "{got}");
        }
        let huge = i64::MAX.to_le_bytes();
        assert!(matches!(parse(&huge), Err(ContainerError::OversizedPickle { .. })));
    }

    #[test]
    fn pad_aligns_the_next_record() {
        for offset in 0..300u64 {
            let p = pad_len(offset);
            assert!(p < ALIGN);
            assert_eq!((offset + 8 + p + 8) % ALIGN, 0, "offset {offset}");
        }
    }

    /// A blob that claims one length and writes another.
    struct Liar(u64, usize);

    impl BlobSource for Liar {
        fn len(&self) -> u64 {
            self.0
        }
        fn write_to(&self, w: &mut dyn Write) -> io::Result<()> {
            w.write_all(&vec![7; self.1])
        }
    }

    #[test]
    fn writes_aligned_records_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.pkl");
        let a: Vec<u8> = (0..100u8).collect();
        let b: &[u8] = b"second";
        let empty: Vec<u8> = Vec::new();
        let unpadded: &[u8] = b"unpadded";
        let records = [
            Record::Pad,
            Record::Data(&a),
            Record::Pad,
            Record::Data(&b),
            Record::Pad,
            Record::Data(&&empty),
            Record::Data(&unpadded),
        ];
        write(&path, b"pickle!", &records).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let c = parse(&bytes).unwrap();
        assert_eq!(&bytes[c.pickle], b"pickle!");
        assert_eq!(c.records.len(), 7);
        for i in [1, 3, 5] {
            assert_eq!(c.records[i].start as u64 % ALIGN, 0, "record {i}");
        }
        for i in [0, 2, 4] {
            assert!(bytes[c.records[i].clone()].iter().all(|&x| x == 0));
            assert!((c.records[i].len() as u64) < ALIGN);
        }
        assert_eq!(&bytes[c.records[1].clone()], &a[..]);
        assert_eq!(&bytes[c.records[3].clone()], b);
        assert_eq!(&bytes[c.records[6].clone()], b"unpadded");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

        for liar in [Liar(10, 9), Liar(10, 11), Liar(0, 1)] {
            let err = write(&path, b"other", &[Record::Pad, Record::Data(&liar)]).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
            assert_eq!(std::fs::read(&path).unwrap(), bytes, "the old file must be untouched");
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "temp file left behind");
        }
    }

    #[test]
    fn integrity_record_covers_what_streamed_and_must_be_last() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.pkl");
        let a: Vec<u8> = (0..100u8).collect();
        write(&path, b"pickle!", &[Record::Pad, Record::Data(&a), Record::Integrity]).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let c = parse(&bytes).unwrap();
        integrity::check(&bytes, c.pickle.clone(), &c.records).unwrap();
        let want = integrity::encode(integrity::hash(b"pickle!"), &[integrity::hash(&[0; 33]), integrity::hash(&a)]);
        assert_eq!(c.records[0].len(), 33); // 8 + 7 + 8 + 33 + 8 = 64
        assert_eq!(&bytes[c.records[2].clone()], &want[..]);

        let err = write(&path, b"x", &[Record::Integrity, Record::Pad]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "the old file must be untouched");
    }

    #[test]
    fn write_into_missing_directory_fails_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no/such/dir/a.pkl");
        assert!(write(&path, b"x", &[]).is_err());
        assert!(!path.exists());
    }

    #[test]
    fn writes_through_symlinks_and_refuses_special_files() {
        use nix::sys::stat::{makedev, mknod, Mode, SFlag};
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.pkl");
        std::fs::write(&real, b"old").unwrap();
        let link = dir.path().join("link.pkl");
        std::os::unix::fs::symlink("real.pkl", &link).unwrap();
        write(&link, b"new", &[]).unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link was replaced");
        assert_eq!(&std::fs::read(&real).unwrap()[8..], b"new");

        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o644)).unwrap();
        let node = dir.path().join("null");
        // A character device with /dev/null's numbers, made here (needs root; skipped without it).
        let have_node = mknod(&node, SFlag::S_IFCHR, Mode::from_bits_truncate(0o666), makedev(1, 3)).is_ok();
        for p in [&fifo, &node].into_iter().filter(|p| p.exists()) {
            let err = write(p, b"x", &[]).unwrap_err().to_string();
            assert!(err.ends_with("not a regular file"), "{err}");
        }
        assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        if have_node {
            assert!(std::fs::symlink_metadata(&node).unwrap().file_type().is_char_device());
        }
        let names = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(names, 3 + usize::from(have_node), "temporary files left behind");
    }

    /// A blob that records the paths registered for removal on a signal while it is written.
    struct Spy(std::cell::RefCell<Vec<std::path::PathBuf>>);

    impl BlobSource for Spy {
        fn len(&self) -> u64 {
            0
        }
        fn write_to(&self, _: &mut dyn Write) -> io::Result<()> {
            *self.0.borrow_mut() = crate::fsio::registered();
            Ok(())
        }
    }

    #[test]
    fn the_temporary_file_is_registered_for_signal_cleanup_while_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.pkl");
        let spy = Spy(Default::default());
        write(&path, b"p", &[Record::Data(&spy)]).unwrap();
        let seen = spy.0.borrow();
        assert!(seen.iter().any(|p| p.parent() == Some(dir.path()) && p != &path), "{seen:?}");
        assert!(crate::fsio::registered().iter().all(|p| p.parent() != Some(dir.path())));
    }

    fn valid_container() -> impl Strategy<Value = Vec<u8>> {
        (
            prop::collection::vec(any::<u8>(), 0..40),
            prop::collection::vec(prop::collection::vec(any::<u8>(), 0..70), 0..5),
        )
            .prop_map(|(p, rs)| {
                let rs: Vec<&[u8]> = rs.iter().map(|r| &r[..]).collect();
                container(&p, &rs)
            })
    }

    fn check(bytes: &[u8]) {
        if let Ok(c) = parse(bytes) {
            assert_eq!(c.pickle.start, 8);
            let mut end = c.pickle.end;
            for r in &c.records {
                assert_eq!(r.start, end + 8);
                end = r.end;
            }
            assert_eq!(end, bytes.len());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn mutated_containers_never_panic(
            bytes in valid_container(),
            flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
            cut in any::<prop::sample::Index>(),
            insert in prop::collection::vec(any::<u8>(), 0..9),
            at in any::<prop::sample::Index>(),
            mode in 0..4u8,
        ) {
            let mut b = bytes.clone();
            check(&b);
            prop_assert!(parse(&b).is_ok());
            for (i, x) in &flips {
                let i = i.index(b.len());
                b[i] ^= x;
            }
            check(&b);
            match mode {
                0 => b.truncate(cut.index(b.len() + 1)),
                1 => {
                    let at = at.index(b.len() + 1);
                    b.splice(at..at, insert.iter().copied());
                }
                2 => b.extend_from_slice(&insert),
                _ => {}
            }
            check(&b);
        }
    }
}
