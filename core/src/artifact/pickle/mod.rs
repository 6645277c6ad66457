//! The plain-data subset of pickle protocol 5 that artifacts use.
//!
//! [`write`] emits only: PROTO 5, FRAME, MEMOIZE, BINGET/LONG_BINGET, MARK, STOP, NONE, NEWTRUE/NEWFALSE,
//! BININT1/BININT2/BININT/LONG1, BINFLOAT, SHORT_BINUNICODE/BINUNICODE/BINUNICODE8,
//! SHORT_BINBYTES/BINBYTES/BINBYTES8, EMPTY_LIST/APPEND/APPENDS, EMPTY_TUPLE/TUPLE1/2/3/TUPLE,
//! EMPTY_DICT/SETITEM/SETITEMS, NEXT_BUFFER.
//! [`read`] accepts that set plus what CPython's pickler emits for plain data at protocols 2 to 5
//! (BINPUT/LONG_BINPUT, READONLY_BUFFER, POP, POP_MARK) and refuses every other opcode — GLOBAL,
//! STACK_GLOBAL, REDUCE, BUILD, ... — naming its offset.
//!
//! Both sides share two limits: containers nest at most [`MAX_DEPTH`] deep, and dict keys are
//! hashable (str, bytes, int, bool, None, and tuples of those) and unique under Python equality.

pub mod opcodes;
pub mod read;
pub mod write;

#[cfg(test)]
mod tests;

use std::collections::HashSet;

pub use read::{read, Pickle, PickleError};
pub use write::{write, WriteError};

/// The deepest container nesting either side accepts: a container may sit inside at most
/// `MAX_DEPTH - 1` others. Keeps recursion (and dropping a [`Value`]) far from the stack limit.
pub const MAX_DEPTH: usize = 256;

/// A plain-data pickle value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<Value>),
    Tuple(Vec<Value>),
    /// Entries in insertion order (Python dicts keep it).
    Dict(Vec<(Value, Value)>),
    /// The n-th out-of-band buffer (NEXT_BUFFER), counted from 0 in stream order.
    Buffer(u32),
}

impl Value {
    /// A `str` value.
    pub fn str(s: impl Into<String>) -> Value {
        Value::Str(s.into())
    }

    /// Looks up a string key in a dict; `None` if this is not a dict or the key is absent.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Dict(entries) => {
                entries.iter().find(|(k, _)| matches!(k, Value::Str(s) if s == key)).map(|(_, v)| v)
            }
            _ => None,
        }
    }

    /// The Python type name, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Tuple(_) => "tuple",
            Value::Dict(_) => "dict",
            Value::Buffer(_) => "PickleBuffer",
        }
    }
}

/// A dict key as Python compares it (`True == 1`); borrowed from the [`Value`] it came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Key<'a> {
    None,
    Int(i64),
    Str(&'a str),
    Bytes(&'a [u8]),
    Tuple(Vec<Key<'a>>),
}

impl Value {
    /// This value as a dict key, or the name of the offending type if it is not an allowed key.
    /// Tuples nested deeper than [`MAX_DEPTH`] are refused as `"tuple"`.
    pub(crate) fn key(&self) -> Result<Key<'_>, &'static str> {
        self.key_at(0)
    }

    fn key_at(&self, depth: usize) -> Result<Key<'_>, &'static str> {
        Ok(match self {
            Value::None => Key::None,
            Value::Bool(b) => Key::Int(i64::from(*b)),
            Value::Int(i) => Key::Int(*i),
            Value::Str(s) => Key::Str(s),
            Value::Bytes(b) => Key::Bytes(b),
            Value::Tuple(items) if depth < MAX_DEPTH => {
                Key::Tuple(items.iter().map(|v| v.key_at(depth + 1)).collect::<Result<_, _>>()?)
            }
            other => return Err(other.type_name()),
        })
    }
}

/// Checks that every key of a dict's entries is allowed and unique.
pub(crate) fn check_keys(entries: &[(Value, Value)]) -> Result<(), KeyProblem> {
    let mut seen = HashSet::with_capacity(entries.len());
    for (k, _) in entries {
        let key = k.key().map_err(KeyProblem::Unhashable)?;
        if !seen.insert(key) {
            return Err(KeyProblem::Duplicate(short_repr(k)));
        }
    }
    Ok(())
}

/// Why a dict's keys were refused.
#[derive(Debug)]
pub(crate) enum KeyProblem {
    /// The type name of a key that is not allowed.
    Unhashable(&'static str),
    /// A short rendering of a key that appears twice.
    Duplicate(String),
}

impl std::fmt::Display for KeyProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyProblem::Unhashable(t) => write!(
                f,
                "dict key of type {t} is not allowed (keys are str, bytes, int, bool, None or tuples of those)"
            ),
            KeyProblem::Duplicate(k) => write!(f, "duplicate dict key {k}"),
        }
    }
}

/// `{:?}` of a value, cut to about 60 characters, for error messages.
fn short_repr(v: &Value) -> String {
    let mut s = format!("{v:?}");
    if s.len() > 60 {
        let mut cut = 57;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}
