//! The writer: a [`Value`] to pickle protocol 5 bytes that CPython's `pickle.load` reads back as
//! builtins only (dict, list, tuple, str, bytes, int, float, bool, None, PickleBuffer).

use std::collections::HashMap;

use super::opcodes::*;
use super::{check_keys, Value, MAX_DEPTH};

/// The frame size CPython aims for; a frame is closed at the first value boundary past it.
const FRAME_TARGET: usize = 64 * 1024;
/// Items per APPENDS / SETITEMS batch, as CPython.
const BATCH: usize = 1000;

/// Why a [`Value`] cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    #[error(
        "out-of-band buffer {found} appears where buffer {expected} is next: \
         buffers must appear exactly once each, in order 0, 1, 2, ..."
    )]
    BufferOrder { expected: u32, found: u32 },
    #[error("containers nested deeper than {MAX_DEPTH}")]
    TooDeep,
    #[error("{0}")]
    Key(String),
    #[error("more than 2^32 memo entries")]
    MemoFull,
}

/// Encodes `value` as pickle protocol 5: PROTO 5, then the body in FRAMEs of about 64 KiB (str and
/// bytes payloads of 64 KiB or more go between frames, as CPython writes them), then STOP.
///
/// Identical strings are written once and referenced through the memo; every `Value::Buffer(n)`
/// becomes NEXT_BUFFER and must appear in stream order 0, 1, 2, ... exactly once. Dict keys must be
/// allowed and unique (see the module docs), containers nest at most [`MAX_DEPTH`] deep.
/// Buffers are not marked READONLY_BUFFER: Python would then load a memoryview, not a PickleBuffer.
pub fn write(value: &Value) -> Result<Vec<u8>, WriteError> {
    let mut w = Writer { out: vec![PROTO, 5], frame_start: None, memo_len: 0, strings: HashMap::new(), next_buffer: 0 };
    w.start_frame();
    w.save(value, 0)?;
    w.out.push(STOP);
    w.end_frame();
    Ok(w.out)
}

struct Writer<'v> {
    out: Vec<u8>,
    /// Position of the open frame's FRAME opcode; its 8-byte length is patched when it closes.
    frame_start: Option<usize>,
    memo_len: u32,
    strings: HashMap<&'v str, u32>,
    next_buffer: u32,
}

impl<'v> Writer<'v> {
    fn start_frame(&mut self) {
        self.frame_start = Some(self.out.len());
        self.out.push(FRAME);
        self.out.extend_from_slice(&[0; 8]);
    }

    fn end_frame(&mut self) {
        if let Some(start) = self.frame_start.take() {
            let len = self.out.len() - start - 9;
            if len == 0 {
                self.out.truncate(start);
            } else {
                self.out[start + 1..start + 9].copy_from_slice(&(len as u64).to_le_bytes());
            }
        }
    }

    fn frame_len(&self) -> usize {
        self.frame_start.map_or(0, |s| self.out.len() - s - 9)
    }

    /// Writes an opcode with its length header and a payload; big payloads go between frames.
    fn payload(&mut self, header: &[u8], payload: &[u8]) {
        if payload.len() >= FRAME_TARGET {
            self.end_frame();
            self.out.extend_from_slice(header);
            self.out.extend_from_slice(payload);
            self.start_frame();
        } else {
            self.out.extend_from_slice(header);
            self.out.extend_from_slice(payload);
        }
    }

    fn sized(&mut self, short: u8, medium: u8, long: u8, payload: &[u8]) {
        let n = payload.len();
        if n < 256 {
            self.payload(&[short, n as u8], payload);
        } else if let Ok(n) = u32::try_from(n) {
            let mut h = [medium, 0, 0, 0, 0];
            h[1..].copy_from_slice(&n.to_le_bytes());
            self.payload(&h, payload);
        } else {
            let mut h = [long, 0, 0, 0, 0, 0, 0, 0, 0];
            h[1..].copy_from_slice(&(n as u64).to_le_bytes());
            self.payload(&h, payload);
        }
    }

    fn memoize(&mut self) -> Result<u32, WriteError> {
        let index = self.memo_len;
        self.memo_len = index.checked_add(1).ok_or(WriteError::MemoFull)?;
        self.out.push(MEMOIZE);
        Ok(index)
    }

    fn get(&mut self, index: u32) {
        match u8::try_from(index) {
            Ok(i) => self.out.extend_from_slice(&[BINGET, i]),
            Err(_) => {
                self.out.push(LONG_BINGET);
                self.out.extend_from_slice(&index.to_le_bytes());
            }
        }
    }

    fn int(&mut self, i: i64) {
        if let Ok(b) = u8::try_from(i) {
            self.out.extend_from_slice(&[BININT1, b]);
        } else if let Ok(h) = u16::try_from(i) {
            self.out.push(BININT2);
            self.out.extend_from_slice(&h.to_le_bytes());
        } else if let Ok(w) = i32::try_from(i) {
            self.out.push(BININT);
            self.out.extend_from_slice(&w.to_le_bytes());
        } else {
            // Shortest two's complement little-endian form, as CPython's encode_long.
            let bytes = i.to_le_bytes();
            let mut n = 8;
            while n > 1 {
                let top = bytes[n - 1];
                let sign_of_next = bytes[n - 2] & 0x80;
                if (top == 0 && sign_of_next == 0) || (top == 0xff && sign_of_next != 0) {
                    n -= 1;
                } else {
                    break;
                }
            }
            self.out.extend_from_slice(&[LONG1, n as u8]);
            self.out.extend_from_slice(&bytes[..n]);
        }
    }

    fn save(&mut self, value: &'v Value, depth: usize) -> Result<(), WriteError> {
        if self.frame_len() >= FRAME_TARGET {
            self.end_frame();
            self.start_frame();
        }
        let is_container = matches!(value, Value::List(_) | Value::Tuple(_) | Value::Dict(_));
        if is_container && depth >= MAX_DEPTH {
            return Err(WriteError::TooDeep);
        }
        match value {
            Value::None => self.out.push(NONE),
            Value::Bool(b) => self.out.push(if *b { NEWTRUE } else { NEWFALSE }),
            Value::Int(i) => self.int(*i),
            Value::Float(f) => {
                self.out.push(BINFLOAT);
                self.out.extend_from_slice(&f.to_be_bytes());
            }
            Value::Str(s) => {
                if let Some(&index) = self.strings.get(s.as_str()) {
                    self.get(index);
                } else {
                    self.sized(SHORT_BINUNICODE, BINUNICODE, BINUNICODE8, s.as_bytes());
                    let index = self.memoize()?;
                    self.strings.insert(s, index);
                }
            }
            Value::Bytes(b) => self.sized(SHORT_BINBYTES, BINBYTES, BINBYTES8, b),
            Value::Buffer(n) => {
                if *n != self.next_buffer {
                    return Err(WriteError::BufferOrder { expected: self.next_buffer, found: *n });
                }
                self.next_buffer += 1;
                self.out.push(NEXT_BUFFER);
            }
            Value::List(items) => {
                self.out.push(EMPTY_LIST);
                self.memoize()?;
                for batch in items.chunks(BATCH) {
                    if batch.len() > 1 {
                        self.out.push(MARK);
                    }
                    for item in batch {
                        self.save(item, depth + 1)?;
                    }
                    self.out.push(if batch.len() > 1 { APPENDS } else { APPEND });
                }
            }
            Value::Tuple(items) => {
                if items.is_empty() {
                    self.out.push(EMPTY_TUPLE);
                    return Ok(());
                }
                if items.len() > 3 {
                    self.out.push(MARK);
                }
                for item in items {
                    self.save(item, depth + 1)?;
                }
                self.out.push(match items.len() {
                    1 => TUPLE1,
                    2 => TUPLE2,
                    3 => TUPLE3,
                    _ => TUPLE,
                });
                self.memoize()?;
            }
            Value::Dict(entries) => {
                check_keys(entries).map_err(|e| WriteError::Key(e.to_string()))?;
                self.out.push(EMPTY_DICT);
                self.memoize()?;
                for batch in entries.chunks(BATCH) {
                    if batch.len() > 1 {
                        self.out.push(MARK);
                    }
                    for (k, v) in batch {
                        self.save(k, depth + 1)?;
                        self.save(v, depth + 1)?;
                    }
                    self.out.push(if batch.len() > 1 { SETITEMS } else { SETITEM });
                }
            }
        }
        Ok(())
    }
}
