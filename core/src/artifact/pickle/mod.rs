//! The plain-data subset of pickle protocol 5 that artifacts use.
//!
//! [`write`] emits only: PROTO 5, FRAME, MEMOIZE, BINGET/LONG_BINGET, MARK, STOP, NONE, NEWTRUE/NEWFALSE,
//! BININT1/BININT2/BININT/LONG1, BINFLOAT, SHORT_BINUNICODE/BINUNICODE/BINUNICODE8,
//! SHORT_BINBYTES/BINBYTES/BINBYTES8, EMPTY_LIST/APPEND/APPENDS, EMPTY_TUPLE/TUPLE1/2/3/TUPLE,
//! EMPTY_DICT/SETITEM/SETITEMS, NEXT_BUFFER, READONLY_BUFFER.
//! [`read`] accepts exactly that set (which is also what CPython's pickler emits for plain data) and
//! refuses every other opcode — GLOBAL, STACK_GLOBAL, REDUCE, BUILD, ... — naming its offset.

pub mod read;
pub mod write;

pub use read::{read, PickleError};
pub use write::write;

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
            Value::Dict(entries) => entries
                .iter()
                .find(|(k, _)| matches!(k, Value::Str(s) if s == key))
                .map(|(_, v)| v),
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
