//! Reader and writer for numpy's `.npy` format (versions 1.0, 2.0 and 3.0).
//!
//! Contract:
//! - An [`Array`] is always little-endian, C order; `data.len() == product(shape) * dtype.size()`.
//! - Reading accepts the descrs `<f2 <f4 <f8 |i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 |b1`, and `<V2` as bfloat16
//!   (what `np.save` writes for an ml_dtypes `bfloat16` array) (any byte-order mark
//!   on one-byte types, `=`/`|` meaning native, `?` for bool); big-endian (`>`) data is byte-swapped to
//!   little-endian. Structured, string, complex and object dtypes and `fortran_order: True` are errors.
//! - The header dict is parsed as the Python literal numpy writes: exactly the keys `descr`,
//!   `fortran_order`, `shape` (any order, single or double quotes, any spacing, optional trailing
//!   comma), followed only by whitespace. The padding/alignment of the header is not checked on read.
//! - The data must be exactly `product(shape) * itemsize` bytes: short or trailing data is an error.
//! - Writing produces version 1.0 (2.0 if the header does not fit in 64 KiB) with the header padded with
//!   spaces and a final newline so the data starts at a multiple of 64 bytes, as numpy does; files are
//!   written atomically (temporary file in the same directory, then rename).
//! - Nothing here panics on malformed input; every error renders as one line.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::DType;

const MAGIC: &[u8] = b"\x93NUMPY";
/// Alignment of the start of the data, as written by numpy ≥ 1.14.
pub const ALIGN: usize = 64;

/// A dense array: little-endian elements in C order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Array {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

/// Why a `.npy` file could not be read or written. Renders as one line (and has no `source()`, so
/// printing an `anyhow` chain with `{:#}` does not repeat it).
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    #[error("{}: {error}", .path.display())]
    Io { path: PathBuf, error: std::io::Error },
    #[error("{}: {error}", .path.display())]
    In { path: PathBuf, error: Box<NpyError> },
    #[error("not a .npy file (bad magic)")]
    BadMagic,
    #[error("truncated .npy file ({0})")]
    Truncated(&'static str),
    #[error("unsupported .npy format version {0}.{1}")]
    Version(u8, u8),
    #[error("bad .npy header: {0}")]
    Header(String),
    #[error("unsupported .npy dtype descr {0:?}")]
    Descr(String),
    #[error("fortran_order arrays are not supported")]
    FortranOrder,
    #[error("shape {0:?} is too large")]
    Overflow(Vec<usize>),
    #[error("data is {actual} bytes but shape {shape:?} of {dtype} needs {expected}")]
    DataLength { dtype: DType, shape: Vec<usize>, expected: usize, actual: usize },
}

impl Array {
    /// Builds an array, checking that `data` has exactly `product(shape) * dtype.size()` bytes.
    pub fn new(dtype: DType, shape: Vec<usize>, data: Vec<u8>) -> Result<Array, NpyError> {
        check_len(dtype, &shape, data.len())?;
        Ok(Array { dtype, shape, data })
    }

    /// Number of elements (`product(shape)`; 1 for a 0-d array), `None` on overflow.
    pub fn num_elements(&self) -> Option<usize> {
        self.shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
    }

    /// Every element as f64 (see [`crate::dtype::to_f64`]).
    pub fn to_f64(&self) -> Vec<f64> {
        crate::dtype::to_f64(self.dtype, &self.data)
    }

    /// Checks the invariant `data.len() == product(shape) * dtype.size()`.
    pub fn validate(&self) -> Result<(), NpyError> {
        check_len(self.dtype, &self.shape, self.data.len())
    }
}

/// `product(shape) * dtype.size()`, or [`NpyError::Overflow`].
pub fn byte_len(dtype: DType, shape: &[usize]) -> Result<usize, NpyError> {
    shape
        .iter()
        .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(|| NpyError::Overflow(shape.to_vec()))
}

fn check_len(dtype: DType, shape: &[usize], actual: usize) -> Result<(), NpyError> {
    let expected = byte_len(dtype, shape)?;
    if actual != expected {
        let shape = shape.to_vec();
        return Err(NpyError::DataLength { dtype, shape, expected, actual });
    }
    Ok(())
}

fn in_file(path: &Path) -> impl Fn(NpyError) -> NpyError + '_ {
    move |e| NpyError::In { path: path.into(), error: Box::new(e) }
}

/// The largest header read (numpy's own reader stops at 10000 bytes by default).
pub const MAX_HEADER: usize = 1 << 20;

/// Reads a `.npy` file: a regular file only (see [`crate::fsio::open_regular`]), its header at most
/// [`MAX_HEADER`] bytes, its size checked against the header's shape before the data is read.
/// Errors name the file.
pub fn read(path: impl AsRef<Path>) -> Result<Array, NpyError> {
    let path = path.as_ref();
    let io = |error| NpyError::Io { path: path.into(), error };
    let file = crate::fsio::open_regular(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    let mut reader = file.take(size);
    let mut head = Vec::new();
    (&mut reader).take(12 + MAX_HEADER as u64).read_to_end(&mut head).map_err(io)?;
    let (h, start) = parse_head(&head).map_err(in_file(path))?;
    let expected = byte_len(h.dtype, &h.shape).map_err(in_file(path))?;
    let actual = usize::try_from(size - start as u64).unwrap_or(usize::MAX);
    if actual != expected {
        let e = NpyError::DataLength { dtype: h.dtype, shape: h.shape, expected, actual };
        return Err(in_file(path)(e));
    }
    let mut data = Vec::new();
    data.try_reserve_exact(expected).map_err(|_| in_file(path)(NpyError::Overflow(h.shape.clone())))?;
    data.extend_from_slice(&head[start..]);
    reader.read_to_end(&mut data).map_err(io)?;
    if data.len() != expected {
        let e = NpyError::DataLength { dtype: h.dtype, shape: h.shape, expected, actual: data.len() };
        return Err(in_file(path)(e));
    }
    finish(h, data)
}

/// Parses the bytes of a `.npy` file.
pub fn read_bytes(bytes: &[u8]) -> Result<Array, NpyError> {
    let (h, start) = parse_head(bytes)?;
    let payload = &bytes[start..];
    check_len(h.dtype, &h.shape, payload.len())?;
    finish(h, payload.to_vec())
}

fn finish(h: Header, mut data: Vec<u8>) -> Result<Array, NpyError> {
    if h.swap {
        data.chunks_exact_mut(h.dtype.size()).for_each(|c| c.reverse());
    }
    Ok(Array { dtype: h.dtype, shape: h.shape, data })
}

/// Parses the magic, version and header at the start of `bytes`; returns the header and the offset
/// of the data.
fn parse_head(bytes: &[u8]) -> Result<(Header, usize), NpyError> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(NpyError::BadMagic);
    }
    let (major, minor) = match bytes.get(6..8) {
        Some(v) => (v[0], v[1]),
        None => return Err(NpyError::Truncated("no version")),
    };
    let (len_size, utf8) = match (major, minor) {
        (1, 0) => (2, false),
        (2, 0) => (4, false),
        (3, 0) => (4, true),
        _ => return Err(NpyError::Version(major, minor)),
    };
    let len_bytes = bytes.get(8..8 + len_size).ok_or(NpyError::Truncated("no header length"))?;
    let header_len = len_bytes.iter().rev().fold(0usize, |acc, &b| (acc << 8) | b as usize);
    if header_len > MAX_HEADER {
        return Err(NpyError::Header(format!("{header_len} bytes, more than the {MAX_HEADER} allowed")));
    }
    let start = 8 + len_size;
    let header_bytes =
        bytes.get(start..start + header_len).ok_or(NpyError::Truncated("header runs past the end of the file"))?;
    let header: String = if utf8 {
        std::str::from_utf8(header_bytes).map_err(|_| NpyError::Header("header is not valid UTF-8".into()))?.to_owned()
    } else {
        header_bytes.iter().map(|&b| b as char).collect() // latin-1
    };
    Ok((parse_header(&header)?, start + header_len))
}

/// Serialises an array to `.npy` bytes; fails if `data` does not match `shape` and `dtype`.
pub fn to_bytes(array: &Array) -> Result<Vec<u8>, NpyError> {
    array.validate()?;
    let shape = match array.shape.as_slice() {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        dims => {
            let parts: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            format!("({})", parts.join(", "))
        }
    };
    let dict = format!("{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}", descr(array.dtype));
    // numpy: pad with spaces so that preamble + header + '\n' is a multiple of ALIGN (1..=ALIGN spaces).
    let mut prefix_len = MAGIC.len() + 2 + 2;
    let mut padded = dict.len() + 1;
    padded += ALIGN - (prefix_len + padded) % ALIGN;
    let version = if padded > u16::MAX as usize {
        prefix_len += 2;
        padded = dict.len() + 1;
        padded += ALIGN - (prefix_len + padded) % ALIGN;
        2u8
    } else {
        1u8
    };
    let header_len = u32::try_from(padded).map_err(|_| NpyError::Overflow(array.shape.clone()))?;
    let mut out = Vec::with_capacity(prefix_len + padded + array.data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(header_len as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&header_len.to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(prefix_len + padded - 1, b' ');
    out.push(b'\n');
    out.extend_from_slice(&array.data);
    Ok(out)
}

/// Writes `array` to `path` atomically: a temporary file in the same directory, then a rename.
/// Only regular files are written, through a symlink if `path` is one (see
/// [`crate::fsio::output_target`]); the temporary file is registered for removal on a signal.
pub fn write(path: impl AsRef<Path>, array: &Array) -> Result<(), NpyError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let path = path.as_ref();
    let bytes = to_bytes(array).map_err(in_file(path))?;
    let io_err = |error| NpyError::Io { path: path.into(), error };
    let path = &crate::fsio::output_target(path).map_err(io_err)?;
    let name = path
        .file_name()
        .ok_or_else(|| io_err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file path")))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut attempt = 0;
    let (tmp, mut file) = loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{}.{}.{n}.tmp", name.to_string_lossy(), std::process::id()));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 100 => attempt += 1,
            Err(e) => return Err(io_err(e)),
        }
    };
    let _registered = crate::fsio::remove_on_signal(&tmp);
    let result = file.write_all(&bytes).and_then(|()| file.sync_all()).and_then(|()| {
        drop(file);
        std::fs::rename(&tmp, path)
    });
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_err(e));
    }
    Ok(())
}

/// The descrs this module writes (what numpy writes on a little-endian machine). numpy has no
/// bfloat16: `np.save` of an ml_dtypes `bfloat16` array writes the 2-byte void descr `<V2`, which
/// is read back as bfloat16.
const DESCRS: [(DType, &str); 13] = [
    (DType::F32, "<f4"),
    (DType::F16, "<f2"),
    (DType::BF16, "<V2"),
    (DType::F64, "<f8"),
    (DType::I8, "|i1"),
    (DType::I16, "<i2"),
    (DType::I32, "<i4"),
    (DType::I64, "<i8"),
    (DType::U8, "|u1"),
    (DType::U16, "<u2"),
    (DType::U32, "<u4"),
    (DType::U64, "<u8"),
    (DType::Bool, "|b1"),
];

/// The descr written for `dtype`, e.g. `"<f4"`.
pub fn descr(dtype: DType) -> &'static str {
    DESCRS.iter().find(|(d, _)| *d == dtype).map_or("", |(_, s)| s)
}

/// Parses a descr string; returns the dtype and whether the data must be byte-swapped.
fn parse_descr(s: &str) -> Result<(DType, bool), NpyError> {
    let (order, rest) = match s.chars().next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (c, &s[1..]),
        _ => ('=', s),
    };
    let rest = if rest == "?" { "b1" } else { rest };
    let (dtype, _) = DESCRS.iter().find(|(_, d)| &d[1..] == rest).ok_or_else(|| NpyError::Descr(s.to_string()))?;
    let big = match order {
        '<' => false,
        '>' => true,
        _ => cfg!(target_endian = "big"),
    };
    Ok((*dtype, big && dtype.size() > 1))
}

struct Header {
    dtype: DType,
    swap: bool,
    shape: Vec<usize>,
}

enum Value {
    Str(String),
    Bool(bool),
    Tuple(Vec<usize>),
}

/// A cursor over the header text, parsing the Python-literal subset numpy writes.
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8, what: &str) -> Result<(), NpyError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.err(&format!("expected {what}")))
        }
    }

    fn err(&self, msg: &str) -> NpyError {
        NpyError::Header(format!("{msg} at offset {}", self.i))
    }

    fn string(&mut self) -> Result<String, NpyError> {
        let q = match self.peek() {
            Some(q @ (b'\'' | b'"')) => q,
            _ => return Err(self.err("expected a quoted string")),
        };
        self.i += 1;
        let start = self.i;
        while let Some(&c) = self.s.get(self.i) {
            if c == q {
                let text = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
                self.i += 1;
                return Ok(text);
            }
            if c == b'\\' || c == b'\n' {
                return Err(self.err("unsupported character in string"));
            }
            self.i += 1;
        }
        Err(self.err("unterminated string"))
    }

    fn int(&mut self) -> Result<usize, NpyError> {
        self.ws();
        let start = self.i;
        let mut v: usize = 0;
        while let Some(&c) = self.s.get(self.i).filter(|c| c.is_ascii_digit()) {
            v = v
                .checked_mul(10)
                .and_then(|v| v.checked_add((c - b'0') as usize))
                .ok_or_else(|| self.err("dimension too large"))?;
            self.i += 1;
        }
        if self.i == start {
            return Err(self.err("expected a non-negative integer dimension"));
        }
        if matches!(self.s.get(self.i), Some(b'L' | b'l')) {
            self.i += 1; // Python 2 long literal, as old numpy wrote
        }
        Ok(v)
    }

    fn value(&mut self) -> Result<Value, NpyError> {
        match self.peek() {
            Some(b'\'' | b'"') => Ok(Value::Str(self.string()?)),
            Some(b'(') => {
                self.i += 1;
                let mut dims = Vec::new();
                if self.eat(b')') {
                    return Ok(Value::Tuple(dims));
                }
                loop {
                    dims.push(self.int()?);
                    let comma = self.eat(b',');
                    if self.eat(b')') {
                        if dims.len() == 1 && !comma {
                            return Err(self.err("shape must be a tuple, e.g. (3,)"));
                        }
                        return Ok(Value::Tuple(dims));
                    }
                    if !comma {
                        return Err(self.err("expected ',' or ')' in shape"));
                    }
                }
            }
            Some(b'T' | b'F') => {
                for (word, v) in [("True", true), ("False", false)] {
                    if self.s[self.i..].starts_with(word.as_bytes()) {
                        self.i += word.len();
                        return Ok(Value::Bool(v));
                    }
                }
                Err(self.err("expected True or False"))
            }
            Some(b'[') => Err(self.err("unsupported list (structured dtypes are not supported)")),
            _ => Err(self.err("unsupported value")),
        }
    }
}

fn parse_header(text: &str) -> Result<Header, NpyError> {
    let mut p = Parser { s: text.as_bytes(), i: 0 };
    p.expect(b'{', "'{'")?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    loop {
        if p.eat(b'}') {
            break;
        }
        let key = p.string()?;
        if !matches!(key.as_str(), "descr" | "fortran_order" | "shape") {
            return Err(NpyError::Header(format!("unexpected key {key:?}")));
        }
        p.expect(b':', "':'")?;
        let value = p.value()?;
        let slot_taken = match (key.as_str(), value) {
            ("descr", Value::Str(s)) => descr.replace(s).is_some(),
            ("fortran_order", Value::Bool(b)) => fortran.replace(b).is_some(),
            ("shape", Value::Tuple(t)) => shape.replace(t).is_some(),
            _ => return Err(NpyError::Header(format!("wrong type for key {key:?}"))),
        };
        if slot_taken {
            return Err(NpyError::Header(format!("duplicate key {key:?}")));
        }
        if !p.eat(b',') {
            p.expect(b'}', "',' or '}'")?;
            break;
        }
    }
    if p.peek().is_some() {
        return Err(p.err("unexpected text after the header dict"));
    }
    let missing = |k: &str| NpyError::Header(format!("missing key {k:?}"));
    let (dtype, swap) = parse_descr(&descr.ok_or_else(|| missing("descr"))?)?;
    if fortran.ok_or_else(|| missing("fortran_order"))? {
        return Err(NpyError::FortranOrder);
    }
    let shape = shape.ok_or_else(|| missing("shape"))?;
    Ok(Header { dtype, swap, shape })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic, distinct bytes.
    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 31 + 7) as u8).collect()
    }

    /// A `.npy` file with the given version, header text (unpadded) and data.
    fn file(version: u8, header: &str, data: &[u8]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[version, 0]);
        let len = (header.len() as u32).to_le_bytes();
        out.extend_from_slice(if version == 1 { &len[..2] } else { &len[..] });
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn round_trip_every_dtype_and_shape() {
        let shapes: [&[usize]; 6] = [&[], &[5], &[2, 3, 4, 5], &[0], &[3, 0, 2], &[1, 1, 1, 1]];
        for dtype in DType::ALL {
            for shape in shapes {
                let n: usize = shape.iter().product();
                let a = Array::new(dtype, shape.to_vec(), pattern(n * dtype.size())).unwrap();
                let bytes = to_bytes(&a).unwrap();
                let data_start = bytes.len() - a.data.len();
                assert_eq!(data_start % ALIGN, 0, "{dtype} {shape:?}");
                assert_eq!(bytes[data_start - 1], b'\n');
                assert_eq!(read_bytes(&bytes).unwrap(), a, "{dtype} {shape:?}");
            }
        }
    }

    #[test]
    fn header_text_matches_numpy() {
        let text = |a: Array| String::from_utf8_lossy(&to_bytes(&a).unwrap()).into_owned();
        let t = text(Array::new(DType::F32, vec![2, 3], vec![0; 24]).unwrap());
        assert!(
            t.starts_with(
                "\u{fffd}NUMPY\u{1}\u{0}v\u{0}{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }     "
            ),
            "{t:?}"
        );
        assert_eq!(t.find('\n'), Some(127 + 2)); // U+FFFD takes 3 bytes
        let t = text(Array::new(DType::Bool, vec![4], vec![1; 4]).unwrap());
        assert!(t.contains("{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }"));
        assert!(text(Array::new(DType::U8, vec![], vec![9]).unwrap()).contains("'shape': (), }"));
    }

    #[test]
    fn huge_header_uses_version_2() {
        let a = Array::new(DType::I16, vec![1usize; 30_000], vec![1, 2]).unwrap();
        let bytes = to_bytes(&a).unwrap();
        assert_eq!((bytes[6], (bytes.len() - 2) % ALIGN), (2, 0));
        assert_eq!(read_bytes(&bytes).unwrap(), a);
    }

    #[test]
    fn file_round_trip_is_atomic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.npy");
        write(&path, &Array::new(DType::F64, vec![2, 2], pattern(32)).unwrap()).unwrap();
        let b = Array::new(DType::I8, vec![3], pattern(3)).unwrap();
        write(&path, &b).unwrap(); // replaces
        assert_eq!(read(&path).unwrap(), b);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["x.npy"], "no temporary files left behind");
        let bad = Array { dtype: DType::F32, shape: vec![2], data: vec![0; 7] };
        let e = write(dir.path().join("bad.npy"), &bad).unwrap_err().to_string();
        assert!(e.contains("needs 8") && e.contains("bad.npy"), "{e}");
        assert!(!dir.path().join("bad.npy").exists());
        let e = read(dir.path().join("missing.npy")).unwrap_err().to_string();
        assert!(e.contains("missing.npy") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn file_reads_refuse_fifos_huge_headers_and_wrong_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("in.npy");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        let e = read(&fifo).unwrap_err().to_string();
        assert!(e.ends_with("is a FIFO, not a regular file"), "{e}");
        let e = write(&fifo, &Array::new(DType::U8, vec![1], vec![1]).unwrap()).unwrap_err().to_string();
        assert!(e.ends_with("not a regular file"), "{e}");

        let path = dir.path().join("h.npy");
        let mut huge = b"\x93NUMPY\x02\x00".to_vec();
        huge.extend_from_slice(&(u32::MAX).to_le_bytes());
        std::fs::write(&path, &huge).unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(e.contains("more than the 1048576 allowed"), "{e}");

        let good = to_bytes(&Array::new(DType::F32, vec![4], pattern(16)).unwrap()).unwrap();
        for (bytes, actual) in [(&good[..good.len() - 1], 15), (&[&good[..], &[0]].concat()[..], 17)] {
            std::fs::write(&path, bytes).unwrap();
            let e = read(&path).unwrap_err().to_string();
            assert!(e.contains(&format!("data is {actual} bytes")) && e.contains("h.npy"), "{e}");
        }
        std::fs::write(&path, &good).unwrap();
        assert_eq!(read(&path).unwrap(), read_bytes(&good).unwrap());
    }

    #[test]
    fn versions_and_tolerant_headers() {
        let data = 1.5f32.to_le_bytes().repeat(3);
        let want = Array::new(DType::F32, vec![3], data.clone()).unwrap();
        let headers = [
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }          \n",
            "{'descr':'<f4','fortran_order':False,'shape':(3,)}",
            "{ \"shape\" : ( 3 , ) , \"fortran_order\" : False , \"descr\" : \"<f4\" }\n",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3L,), }   \n",
            "{'descr': 'f4', 'fortran_order': False, 'shape': (3,), }\t\r\n",
        ];
        for header in headers {
            for v in [1, 2, 3] {
                let got = read_bytes(&file(v, header, &data));
                assert_eq!(got.unwrap_or_else(|e| panic!("{header}: {e}")), want, "{header}");
            }
        }
    }

    #[test]
    fn one_byte_and_big_endian_descrs() {
        let parse = |descr: &str, shape: &str, data: &[u8]| {
            let h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
            read_bytes(&file(1, &h, data)).unwrap()
        };
        for d in ["|u1", "<u1", ">u1", "=u1", "u1"] {
            assert_eq!(parse(d, "(2,)", &[1, 2]).data, [1, 2]);
        }
        assert_eq!(parse("|b1", "()", &[1]).dtype, DType::Bool);
        assert_eq!(parse("?", "()", &[1]).dtype, DType::Bool);
        let be: Vec<u8> = [1.0f32, -2.5].iter().flat_map(|v| v.to_be_bytes()).collect();
        let le: Vec<u8> = [1.0f32, -2.5].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(parse(">f4", "(2,)", &be).data, le);
        assert_eq!(parse(">i2", "(1,)", &[0x12, 0x34]).data, [0x34, 0x12]);
    }

    #[test]
    fn malformed_files_are_one_line_errors() {
        let ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
        let mut bad_utf8 = file(3, ok, &[0; 8]);
        bad_utf8[12] = 0xff;
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"NUMPY\x01\x00".to_vec(), "bad magic"),
            (b"\x93NUMPY".to_vec(), "truncated"),
            (b"\x93NUMPY\x01\x00\x05".to_vec(), "truncated"),
            (file(1, ok, &[0; 8])[..20].to_vec(), "truncated"),
            (file(4, ok, &[0; 8]), "version 4.0"),
            (file(1, ok, &[0; 7]), "7 bytes"),
            (file(1, ok, &[0; 9]), "9 bytes"),
            (bad_utf8, "UTF-8"),
        ];
        for (bytes, want) in cases {
            let e = read_bytes(&bytes).unwrap_err().to_string();
            assert!(e.contains(want) && !e.contains('\n'), "{e:?} lacks {want:?}");
        }
        let cases = "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), } => fortran_order
            {'descr': '<f4', 'shape': (2,), } => missing key \"fortran_order\"
            {'descr': '<f4', 'fortran_order': False} => missing key \"shape\"
            {'fortran_order': False, 'shape': (2,)} => missing key \"descr\"
            {'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1} => unexpected key \"x\"
            {'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)} => duplicate
            {'descr': '<c8', 'fortran_order': False, 'shape': (2,), } => descr \"<c8\"
            {'descr': '<U4', 'fortran_order': False, 'shape': (2,), } => descr \"<U4\"
            {'descr': '|f4x', 'fortran_order': False, 'shape': (2,), } => descr \"|f4x\"
            {'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)} => structured
            {'descr': '<f4', 'fortran_order': False, 'shape': (2), } => must be a tuple
            {'descr': '<f4', 'fortran_order': False, 'shape': (-2,), } => non-negative
            {'descr': '<f4', 'fortran_order': False, 'shape': (2 2), } => expected ','
            {'descr': '<f4', 'fortran_order': False, 'shape': [2], } => unsupported list
            {'descr': '<f4', 'fortran_order': 0, 'shape': (2,), } => unsupported value
            {'descr': '<f4', 'fortran_order': Tru, 'shape': (2,), } => True or False
            {'descr': (2,), 'fortran_order': False, 'shape': (2,), } => wrong type
            {'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x => after the header
            {'descr': '<f4' 'fortran_order': False, 'shape': (2,), } => expected ','
            {'descr' '<f4', 'fortran_order': False, 'shape': (2,), } => expected ':'
            {'descr': '<f4', 'fortran_order': False, 'shape': (2,) => expected ','
            {'descr': 'a\\b'} => unsupported character
            {'descr': '<f4 => unterminated
            'descr' => expected '{'
            {'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,)} => too large
            {'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)} => too large";
        for line in cases.lines().chain(["  => expected '{'"]) {
            let (header, want) = line.trim().split_once(" => ").unwrap_or(("", "expected '{'"));
            let e = read_bytes(&file(1, header, &[0; 8])).map(|a| format!("accepted {a:?}"));
            let e = e.unwrap_or_else(|e| e.to_string());
            assert!(e.contains(want) && !e.contains('\n'), "{header}: {e:?} lacks {want:?}");
        }
    }

    #[test]
    fn garbage_never_panics() {
        let good = to_bytes(&Array::new(DType::I32, vec![2, 3], pattern(24)).unwrap()).unwrap();
        for cut in 0..good.len() {
            assert!(read_bytes(&good[..cut]).is_err());
        }
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let mut bytes = good.clone();
            let pos = (state as usize >> 8) % bytes.len();
            bytes[pos] = (state >> 56) as u8;
            let _ = read_bytes(&bytes);
        }
    }

    /// Interop with numpy (the venv's) both ways, for every dtype; skipped without the venv, a failure under
    /// `PILOT_REQUIRE=1`.
    #[test]
    fn numpy_interop() {
        let Some(python) = pilot_test_support::venv_python() else { return };
        let dir = tempfile::tempdir().unwrap();
        // numpy reads bfloat16's `<V2` as raw 2-byte voids: ml_dtypes (an onnx dependency) names them, and numpy
        // writes an ml_dtypes bfloat16 array as `<V2` again (little-endian only: no byte-swapped form to test).
        let script = "import numpy as np, sys, ml_dtypes
a = np.load(sys.argv[1])
if sys.argv[3] == 'bfloat16': a = a.view(ml_dtypes.bfloat16)
assert a.dtype == np.dtype(sys.argv[3]) and a.shape == (2, 3, 4), (a.dtype, a.shape)
assert a.tobytes() == bytes.fromhex(sys.argv[4]), 'data differs'
np.save(sys.argv[2], a.astype(a.dtype.newbyteorder('>')) if a.dtype.itemsize > 1 and a.dtype.kind != 'V' else a)";
        for dtype in DType::ALL {
            let (ours, theirs) = (dir.path().join("ours.npy"), dir.path().join("theirs.npy"));
            let one: Vec<u8> = match dtype {
                DType::F16 => half::f16::ONE.to_le_bytes().to_vec(),
                DType::F32 => 1f32.to_le_bytes().to_vec(),
                DType::F64 => 1f64.to_le_bytes().to_vec(),
                _ => 1u64.to_le_bytes()[..dtype.size()].to_vec(),
            };
            let zero = vec![0; one.len()];
            let bytes: Vec<u8> = (0..24).flat_map(|i| if i % 3 == 0 { &one } else { &zero }.clone()).collect();
            write(&ours, &Array::new(dtype, vec![2, 3, 4], bytes.clone()).unwrap()).unwrap();
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let out = std::process::Command::new(&python)
                .args(["-c", script])
                .args([&ours, &theirs])
                .args([dtype.name(), &hex])
                .output()
                .unwrap();
            assert!(out.status.success(), "{dtype}: {}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(read(&theirs).unwrap(), Array::new(dtype, vec![2, 3, 4], bytes).unwrap());
        }
        // Format versions 2.0 and 3.0 and a Fortran-ordered array, as numpy writes them.
        let script = "import numpy as np, sys
a = np.arange(6, dtype='<i4').reshape(2, 3)
for v in (2, 3):
    with open(f'{sys.argv[1]}/v{v}.npy', 'wb') as f: np.lib.format.write_array(f, a, version=(v, 0))
np.save(f'{sys.argv[1]}/fortran.npy', np.asfortranarray(a))";
        let out = std::process::Command::new(&python).args(["-c", script]).arg(dir.path()).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let data = (0..6i32).flat_map(i32::to_le_bytes).collect();
        let want = Array::new(DType::I32, vec![2, 3], data).unwrap();
        assert_eq!(read(dir.path().join("v2.npy")).unwrap(), want);
        assert_eq!(read(dir.path().join("v3.npy")).unwrap(), want);
        let e = read(dir.path().join("fortran.npy")).unwrap_err().to_string();
        assert!(e.contains("fortran_order"), "{e}");
    }
}
