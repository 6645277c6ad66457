//! A small strict MessagePack reader for the code object's metadata note.
//!
//! LLVM writes the note with `llvm/BinaryFormat/MsgPackDocument` (maps, arrays, strings, integers,
//! booleans; floats and binary for completeness). This reader takes exactly one value filling the whole
//! input and refuses extension types, reserved bytes, strings that are not UTF-8, nesting deeper than
//! [`MAX_DEPTH`] and any count larger than the bytes left could hold, so a hostile note can neither
//! make it allocate beyond its own size nor recurse without bound. Errors carry the byte offset.

/// A decoded value. Maps keep their entries in file order.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Nil,
    Bool(bool),
    /// Every integer format, signed or not, widened.
    Int(i128),
    Float(f64),
    Str(String),
    Bin(Vec<u8>),
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
}

/// Deepest nesting accepted (the metadata is four levels deep).
pub const MAX_DEPTH: usize = 16;

/// Why the bytes are not one MessagePack value; `offset` is where decoding stopped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("msgpack byte {offset}: {msg}")]
pub struct DecodeError {
    pub offset: usize,
    pub msg: String,
}

/// Decodes `data` as exactly one value.
pub fn decode(data: &[u8]) -> Result<Value, DecodeError> {
    let mut r = Reader { data, pos: 0 };
    let v = r.value(0)?;
    if r.pos != data.len() {
        return Err(r.err(format!("{} trailing bytes after the value", data.len() - r.pos)));
    }
    Ok(v)
}

impl Value {
    /// The value under string key `key`, if this is a map that has it.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(entries) => entries.iter().find(|(k, _)| matches!(k, Value::Str(s) if s == key)).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The type's name, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Nil => "nil",
            Value::Bool(_) => "bool",
            Value::Int(_) => "integer",
            Value::Float(_) => "float",
            Value::Str(_) => "string",
            Value::Bin(_) => "binary",
            Value::Array(_) => "array",
            Value::Map(_) => "map",
        }
    }
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn err(&self, msg: impl Into<String>) -> DecodeError {
        DecodeError { offset: self.pos, msg: msg.into() }
    }

    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| self.err(format!("needs {n} more bytes, {} left", self.data.len() - self.pos)))?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn uint(&mut self, n: usize) -> Result<u64, DecodeError> {
        Ok(self.take(n)?.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    /// A count of `n`-byte length, checked against what the rest of the input could hold when each
    /// item takes at least `min_item` bytes.
    fn count(&mut self, n: usize, min_item: usize) -> Result<usize, DecodeError> {
        let c = self.uint(n)?;
        self.bounded(c, min_item)
    }

    fn bounded(&self, c: u64, min_item: usize) -> Result<usize, DecodeError> {
        let left = (self.data.len() - self.pos) as u64;
        if c.saturating_mul(min_item as u64) > left {
            return Err(self.err(format!("count {c} exceeds the {left} bytes left")));
        }
        Ok(c as usize)
    }

    fn value(&mut self, depth: usize) -> Result<Value, DecodeError> {
        if depth > MAX_DEPTH {
            return Err(self.err(format!("nested deeper than {MAX_DEPTH}")));
        }
        let start = self.pos;
        let tag = self.take(1)?[0];
        Ok(match tag {
            0x00..=0x7f => Value::Int(i128::from(tag)),
            0x80..=0x8f => {
                let n = self.bounded(u64::from(tag & 0x0f), 2)?;
                self.map(n, depth)?
            }
            0x90..=0x9f => {
                let n = self.bounded(u64::from(tag & 0x0f), 1)?;
                self.array(n, depth)?
            }
            0xa0..=0xbf => self.str(usize::from(tag & 0x1f))?,
            0xc0 => Value::Nil,
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4..=0xc6 => {
                let n = self.count(1 << (tag - 0xc4), 1)?;
                Value::Bin(self.take(n)?.to_vec())
            }
            0xca => Value::Float(f64::from(f32::from_bits(self.uint(4)? as u32))),
            0xcb => Value::Float(f64::from_bits(self.uint(8)?)),
            0xcc..=0xcf => Value::Int(i128::from(self.uint(1 << (tag - 0xcc))?)),
            0xd0..=0xd3 => {
                let bytes = 1usize << (tag - 0xd0);
                let raw = self.uint(bytes)?;
                let shift = 64 - 8 * bytes as u32;
                Value::Int(i128::from(((raw << shift) as i64) >> shift))
            }
            0xd9..=0xdb => {
                let n = self.count(1 << (tag - 0xd9), 1)?;
                self.str(n)?
            }
            0xdc | 0xdd => {
                let n = self.count(if tag == 0xdc { 2 } else { 4 }, 1)?;
                self.array(n, depth)?
            }
            0xde | 0xdf => {
                let n = self.count(if tag == 0xde { 2 } else { 4 }, 2)?;
                self.map(n, depth)?
            }
            0xe0..=0xff => Value::Int(i128::from(tag as i8)),
            0xc1 => return Err(DecodeError { offset: start, msg: "reserved byte 0xc1".into() }),
            0xc7..=0xc9 | 0xd4..=0xd8 => {
                return Err(DecodeError { offset: start, msg: format!("extension type 0x{tag:02x} is not metadata") })
            }
        })
    }

    fn str(&mut self, n: usize) -> Result<Value, DecodeError> {
        let start = self.pos;
        let bytes = self.take(n)?;
        std::str::from_utf8(bytes)
            .map(|s| Value::Str(s.to_string()))
            .map_err(|_| DecodeError { offset: start, msg: "string is not UTF-8".into() })
    }

    fn array(&mut self, n: usize, depth: usize) -> Result<Value, DecodeError> {
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(self.value(depth + 1)?);
        }
        Ok(Value::Array(items))
    }

    fn map(&mut self, n: usize, depth: usize) -> Result<Value, DecodeError> {
        let mut entries: Vec<(Value, Value)> = Vec::with_capacity(n);
        for _ in 0..n {
            let at = self.pos;
            let k = self.value(depth + 1)?;
            if entries.iter().any(|(e, _)| *e == k) {
                return Err(DecodeError { offset: at, msg: format!("duplicate map key {k:?}") });
            }
            let v = self.value(depth + 1)?;
            entries.push((k, v));
        }
        Ok(Value::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_decodes() {
        let cases: &[(&[u8], Value)] = &[
            (&[0x05], Value::Int(5)),
            (&[0xff], Value::Int(-1)),
            (&[0xcc, 0xc8], Value::Int(200)),
            (&[0xcd, 0x01, 0x00], Value::Int(256)),
            (&[0xce, 0, 1, 0, 0], Value::Int(65536)),
            (&[0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], Value::Int(u64::MAX as i128)),
            (&[0xd0, 0x80], Value::Int(-128)),
            (&[0xd1, 0xff, 0x00], Value::Int(-256)),
            (&[0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0], Value::Int(i64::MIN as i128)),
            (&[0xc0], Value::Nil),
            (&[0xc3], Value::Bool(true)),
            (&[0xa2, b'h', b'i'], Value::Str("hi".into())),
            (&[0xd9, 0x01, b'x'], Value::Str("x".into())),
            (&[0xc4, 0x02, 1, 2], Value::Bin(vec![1, 2])),
            (&[0xca, 0x3f, 0x80, 0, 0], Value::Float(1.0)),
            (&[0x92, 0x01, 0xc2], Value::Array(vec![Value::Int(1), Value::Bool(false)])),
            (&[0x81, 0xa1, b'a', 0x07], Value::Map(vec![(Value::Str("a".into()), Value::Int(7))])),
            (&[0xdc, 0x00, 0x01, 0x00], Value::Array(vec![Value::Int(0)])),
        ];
        for (bytes, want) in cases {
            assert_eq!(decode(bytes).as_ref(), Ok(want), "{bytes:02x?}");
        }
    }

    #[test]
    fn malformed_input_is_refused_with_the_offset() {
        let err = |b: &[u8]| decode(b).unwrap_err().to_string();
        assert_eq!(err(&[]), "msgpack byte 0: needs 1 more bytes, 0 left");
        assert_eq!(err(&[0x01, 0x02]), "msgpack byte 1: 1 trailing bytes after the value");
        assert_eq!(err(&[0xc1]), "msgpack byte 0: reserved byte 0xc1");
        assert_eq!(err(&[0x91, 0xd4, 0, 0]), "msgpack byte 1: extension type 0xd4 is not metadata");
        assert_eq!(err(&[0xa1, 0xff]), "msgpack byte 1: string is not UTF-8");
        assert_eq!(err(&[0xdd, 0xff, 0xff, 0xff, 0xff]), "msgpack byte 5: count 4294967295 exceeds the 0 bytes left");
        assert_eq!(err(&[0x82, 0xa1, b'a', 1, 0xa1, b'a', 2]), "msgpack byte 4: duplicate map key Str(\"a\")");
        let deep = vec![0x91; MAX_DEPTH + 2];
        assert!(err(&deep).contains("nested deeper than 16"));
    }
}
