//! The strict reader for untrusted bytes: a pickle stack machine that knows only plain data.
//!
//! It runs in two passes. The stack machine builds a flat graph of nodes (containers refer to
//! children by index, and memo references share nodes, as Python objects do), so it never recurses
//! and its memory is proportional to the input. Materializing the root then turns the graph into a
//! [`Value`] tree, refusing cycles, nesting deeper than [`MAX_DEPTH`], and memo references that
//! expand past a budget proportional to the input (the "billion laughs" pickle).

use std::collections::HashMap;

use super::opcodes::{self, *};
use super::{check_keys, Value, MAX_DEPTH};

/// A decoded payload.
#[derive(Clone, Debug, PartialEq)]
pub struct Pickle {
    pub value: Value,
    /// How many NEXT_BUFFER opcodes the stream holds: `value` refers to buffers `0..buffer_count`.
    pub buffer_count: u32,
}

/// Why a pickle was refused. Display is one line, `pickle offset N: reason`, where N is the byte
/// offset in the pickle stream of the opcode at fault (or of the opcode that created the value at fault).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("pickle offset {offset}: {reason}")]
pub struct PickleError {
    pub offset: usize,
    pub reason: String,
}

/// Decodes a plain-data pickle (protocols 2 to 5) from untrusted bytes. Never panics; allocates at
/// most a small multiple of `bytes.len()`.
///
/// The stream must start with PROTO 2..=5, end with STOP as its last byte, leave exactly one value
/// and no open MARK, and use only the opcodes listed in the module docs. Every other opcode is
/// refused with its offset, byte and name. Strings must be UTF-8; ints must fit `i64`; dict keys
/// must be str, bytes, int, bool, None or tuples of those, and unique; containers nest at most
/// [`MAX_DEPTH`] deep; the value may contain no cycle, and memo references may not expand it past
/// `max(2^20, 16 * bytes.len())` values or `max(64 MiB, 16 * bytes.len())` bytes of str and bytes.
pub fn read(bytes: &[u8]) -> std::result::Result<Pickle, PickleError> {
    let mut m = Machine {
        input: bytes,
        pos: 0,
        op_start: 0,
        frame_end: None,
        nodes: Vec::new(),
        origin: Vec::new(),
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
        buffers: 0,
    };
    let root = m.run()?;
    let mut b = Builder {
        nodes: &m.nodes,
        origin: &m.origin,
        on_path: vec![false; m.nodes.len()],
        values_left: (1usize << 20).max(bytes.len().saturating_mul(16)),
        bytes_left: (64usize << 20).max(bytes.len().saturating_mul(16)),
    };
    let value = b.build(root, 0)?;
    Ok(Pickle { value, buffer_count: m.buffers })
}

enum Node {
    /// Any non-container value.
    Leaf(Value),
    List(Vec<usize>),
    /// Tuples are immutable, so whether one can be a dict key is known when it is built.
    Tuple {
        items: Vec<usize>,
        hashable: bool,
    },
    Dict(Vec<(usize, usize)>),
}

impl Node {
    fn type_name(&self) -> &'static str {
        match self {
            Node::Leaf(v) => v.type_name(),
            Node::List(_) => "list",
            Node::Tuple { .. } => "tuple",
            Node::Dict(_) => "dict",
        }
    }

    fn hashable(&self) -> bool {
        match self {
            Node::Leaf(v) => !matches!(v, Value::Float(_) | Value::Buffer(_)),
            Node::Tuple { hashable, .. } => *hashable,
            Node::List(_) | Node::Dict(_) => false,
        }
    }
}

struct Machine<'a> {
    input: &'a [u8],
    pos: usize,
    /// Offset of the opcode being executed, for errors.
    op_start: usize,
    /// End of the current FRAME, while inside one.
    frame_end: Option<usize>,
    nodes: Vec<Node>,
    /// Offset of the opcode that created each node.
    origin: Vec<usize>,
    stack: Vec<usize>,
    /// Stack heights at each open MARK; values below the top mark are out of reach, as in CPython.
    marks: Vec<usize>,
    memo: HashMap<u32, usize>,
    buffers: u32,
}

type Result<T> = std::result::Result<T, PickleError>;

impl<'a> Machine<'a> {
    fn err<T>(&self, reason: impl Into<String>) -> Result<T> {
        Err(PickleError { offset: self.op_start, reason: reason.into() })
    }

    /// Takes `n` bytes, checking them against the input and the current frame before anything else.
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if let Some(end) = self.frame_end {
            if self.pos >= end {
                self.frame_end = None;
            } else if n > end - self.pos {
                return self.err(format!("opcode runs past the end of its FRAME at offset {end}"));
            }
        }
        let rest = self.input.len() - self.pos;
        if n > rest {
            return self.err(format!("truncated: needs {n} more bytes, {rest} left"));
        }
        let s = &self.input[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// A u64 length that must fit the rest of the input (checked again by `take`).
    fn len8(&mut self) -> Result<usize> {
        let n = u64::from_le_bytes(self.array()?);
        match usize::try_from(n) {
            Ok(n) if n <= self.input.len() - self.pos => Ok(n),
            _ => self.err(format!("length {n} exceeds the {} bytes left", self.input.len() - self.pos)),
        }
    }

    fn push(&mut self, node: Node) {
        self.stack.push(self.nodes.len());
        self.nodes.push(node);
        self.origin.push(self.op_start);
    }

    fn push_leaf(&mut self, v: Value) {
        self.push(Node::Leaf(v));
    }

    /// Stack height below which values are out of reach (the top MARK).
    fn fence(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    /// The `n` values on top of the stack above the fence.
    fn pop_n(&mut self, n: usize) -> Result<Vec<usize>> {
        if self.stack.len() < self.fence() + n {
            return self.err(format!("needs {n} values on the stack above the last MARK"));
        }
        Ok(self.stack.split_off(self.stack.len() - n))
    }

    fn top(&self) -> Result<usize> {
        match self.stack.last() {
            Some(&id) if self.stack.len() > self.fence() => Ok(id),
            _ => self.err("needs a value on the stack above the last MARK"),
        }
    }

    /// Pops everything above the top MARK and the MARK itself. Invariant: the stack never shrinks
    /// below the top MARK's height except here (every other pop stops at the fence).
    fn pop_mark(&mut self) -> Result<Vec<usize>> {
        match self.marks.pop() {
            Some(height) => Ok(self.stack.split_off(height)),
            None => self.err("no MARK to pop to"),
        }
    }

    fn text(&mut self, n: usize) -> Result<()> {
        let bytes = self.take(n)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => {
                self.push_leaf(Value::Str(s.to_owned()));
                Ok(())
            }
            Err(e) => self.err(format!("str is not valid UTF-8: {e}")),
        }
    }

    fn bytes(&mut self, n: usize) -> Result<()> {
        let bytes = self.take(n)?.to_vec();
        self.push_leaf(Value::Bytes(bytes));
        Ok(())
    }

    fn tuple(&mut self, items: Vec<usize>) {
        let hashable = items.iter().all(|&i| self.nodes[i].hashable());
        self.push(Node::Tuple { items, hashable });
    }

    fn extend_list(&mut self, items: Vec<usize>) -> Result<()> {
        let target = self.top()?;
        match &mut self.nodes[target] {
            Node::List(list) => {
                list.extend(items);
                Ok(())
            }
            other => {
                let t = other.type_name();
                self.err(format!("appends to a {t}, not a list"))
            }
        }
    }

    fn set_items(&mut self, items: Vec<usize>) -> Result<()> {
        if items.len() & 1 != 0 {
            return self.err("odd number of items for SETITEMS");
        }
        let target = self.top()?;
        for &k in items.iter().step_by(2) {
            if !self.nodes[k].hashable() {
                let t = self.nodes[k].type_name();
                return self.err(format!(
                    "dict key of type {t} is not allowed (keys are str, bytes, int, bool, None or tuples of those)"
                ));
            }
        }
        match &mut self.nodes[target] {
            Node::Dict(dict) => {
                dict.extend(items.chunks_exact(2).map(|kv| (kv[0], kv[1])));
                Ok(())
            }
            other => {
                let t = other.type_name();
                self.err(format!("sets items on a {t}, not a dict"))
            }
        }
    }

    fn memo_put(&mut self, index: u32) -> Result<()> {
        let top = self.top()?;
        self.memo.insert(index, top);
        Ok(())
    }

    fn memo_get(&mut self, index: u32) -> Result<()> {
        match self.memo.get(&index) {
            Some(&id) => {
                self.stack.push(id);
                Ok(())
            }
            None => self.err(format!("memo index {index} is not defined")),
        }
    }

    /// Runs the stack machine to STOP and returns the root node.
    fn run(&mut self) -> Result<usize> {
        loop {
            self.op_start = self.pos;
            if self.pos == self.input.len() {
                return self.err("the pickle ends without STOP");
            }
            let op = self.u8()?;
            if self.op_start == 0 && op != PROTO {
                return self.err(format!(
                    "starts with opcode {}, not PROTO (protocol 2 or later is required)",
                    opcodes::describe(op)
                ));
            }
            match op {
                PROTO => {
                    let version = self.u8()?;
                    if self.op_start != 0 {
                        return self.err("PROTO after the start of the stream");
                    }
                    if !(2..=5).contains(&version) {
                        return self.err(format!("unsupported protocol {version} (2 to 5 are read)"));
                    }
                }
                FRAME => {
                    if matches!(self.frame_end, Some(end) if self.pos < end) {
                        return self.err("FRAME before the end of the current frame");
                    }
                    self.frame_end = None;
                    let n = self.len8()?;
                    self.frame_end = Some(self.pos + n);
                }
                STOP => {
                    if !self.marks.is_empty() {
                        return self.err("STOP with a MARK still open");
                    }
                    if self.stack.len() != 1 {
                        let n = self.stack.len();
                        return self.err(format!("STOP with {n} values on the stack, not 1"));
                    }
                    if self.pos != self.input.len() {
                        let n = self.input.len() - self.pos;
                        return self.err(format!("{n} trailing bytes after STOP"));
                    }
                    return Ok(self.stack[0]);
                }
                MARK => self.marks.push(self.stack.len()),
                POP => {
                    if self.marks.last() == Some(&self.stack.len()) {
                        self.marks.pop();
                    } else {
                        self.pop_n(1)?;
                    }
                }
                POP_MARK => {
                    self.pop_mark()?;
                }
                NONE => self.push_leaf(Value::None),
                NEWTRUE => self.push_leaf(Value::Bool(true)),
                NEWFALSE => self.push_leaf(Value::Bool(false)),
                BININT1 => {
                    let v = self.u8()?;
                    self.push_leaf(Value::Int(v.into()));
                }
                BININT2 => {
                    let v = u16::from_le_bytes(self.array()?);
                    self.push_leaf(Value::Int(v.into()));
                }
                BININT => {
                    let v = i32::from_le_bytes(self.array()?);
                    self.push_leaf(Value::Int(v.into()));
                }
                LONG1 => {
                    let n = usize::from(self.u8()?);
                    if n > 8 {
                        return self.err(format!("LONG1 of {n} bytes does not fit a 64-bit int"));
                    }
                    let digits = self.take(n)?;
                    let fill = match digits.last() {
                        Some(&b) if b & 0x80 != 0 => 0xff,
                        _ => 0,
                    };
                    let mut le = [fill; 8];
                    le[..n].copy_from_slice(digits);
                    self.push_leaf(Value::Int(i64::from_le_bytes(le)));
                }
                BINFLOAT => {
                    let v = f64::from_be_bytes(self.array()?);
                    self.push_leaf(Value::Float(v));
                }
                SHORT_BINUNICODE => {
                    let n = self.u8()?;
                    self.text(n.into())?;
                }
                BINUNICODE => {
                    let n = self.u32()?;
                    self.text(n as usize)?;
                }
                BINUNICODE8 => {
                    let n = self.len8()?;
                    self.text(n)?;
                }
                SHORT_BINBYTES => {
                    let n = self.u8()?;
                    self.bytes(n.into())?;
                }
                BINBYTES => {
                    let n = self.u32()?;
                    self.bytes(n as usize)?;
                }
                BINBYTES8 => {
                    let n = self.len8()?;
                    self.bytes(n)?;
                }
                EMPTY_LIST => self.push(Node::List(Vec::new())),
                EMPTY_DICT => self.push(Node::Dict(Vec::new())),
                EMPTY_TUPLE => self.tuple(Vec::new()),
                TUPLE1 | TUPLE2 | TUPLE3 => {
                    let items = self.pop_n(usize::from(op - TUPLE1) + 1)?;
                    self.tuple(items);
                }
                TUPLE => {
                    let items = self.pop_mark()?;
                    self.tuple(items);
                }
                APPEND => {
                    let item = self.pop_n(1)?;
                    self.extend_list(item)?;
                }
                APPENDS => {
                    let items = self.pop_mark()?;
                    self.extend_list(items)?;
                }
                SETITEM => {
                    let kv = self.pop_n(2)?;
                    self.set_items(kv)?;
                }
                SETITEMS => {
                    let items = self.pop_mark()?;
                    self.set_items(items)?;
                }
                MEMOIZE => {
                    let index = u32::try_from(self.memo.len()).unwrap_or(u32::MAX);
                    self.memo_put(index)?;
                }
                BINPUT => {
                    let index = self.u8()?;
                    self.memo_put(index.into())?;
                }
                LONG_BINPUT => {
                    let index = self.u32()?;
                    self.memo_put(index)?;
                }
                BINGET => {
                    let index = self.u8()?;
                    self.memo_get(index.into())?;
                }
                LONG_BINGET => {
                    let index = self.u32()?;
                    self.memo_get(index)?;
                }
                NEXT_BUFFER => {
                    let n = self.buffers;
                    self.buffers = match n.checked_add(1) {
                        Some(b) => b,
                        None => return self.err("more than 2^32 out-of-band buffers"),
                    };
                    self.push_leaf(Value::Buffer(n));
                }
                READONLY_BUFFER => {
                    let top = self.top()?;
                    if !matches!(self.nodes[top], Node::Leaf(Value::Buffer(_))) {
                        let t = self.nodes[top].type_name();
                        return self.err(format!("READONLY_BUFFER on a {t}, not an out-of-band buffer"));
                    }
                }
                other => {
                    return self
                        .err(format!("opcode {} is not allowed: artifacts are plain data", opcodes::describe(other)))
                }
            }
        }
    }
}

/// Turns the node graph into a tree, within the budgets.
struct Builder<'m> {
    nodes: &'m [Node],
    origin: &'m [usize],
    /// Containers being built on the current path: meeting one again is a cycle.
    on_path: Vec<bool>,
    values_left: usize,
    bytes_left: usize,
}

impl Builder<'_> {
    fn err<T>(&self, id: usize, reason: impl Into<String>) -> Result<T> {
        Err(PickleError { offset: self.origin[id], reason: reason.into() })
    }

    fn spend(&mut self, id: usize, bytes: usize) -> Result<()> {
        if self.values_left == 0 || self.bytes_left < bytes {
            return self.err(id, "memo references expand the value past its budget (a memo bomb?)");
        }
        self.values_left -= 1;
        self.bytes_left -= bytes;
        Ok(())
    }

    fn build(&mut self, id: usize, depth: usize) -> Result<Value> {
        let value = match &self.nodes[id] {
            Node::Leaf(v) => {
                let bytes = match v {
                    Value::Str(s) => s.len(),
                    Value::Bytes(b) => b.len(),
                    _ => 0,
                };
                self.spend(id, bytes)?;
                return Ok(v.clone());
            }
            Node::List(items) => {
                self.enter(id, depth)?;
                Value::List(self.build_all(items, depth)?)
            }
            Node::Tuple { items, .. } => {
                self.enter(id, depth)?;
                Value::Tuple(self.build_all(items, depth)?)
            }
            Node::Dict(entries) => {
                self.enter(id, depth)?;
                let mut out = Vec::with_capacity(entries.len().min(self.values_left));
                for &(k, v) in entries {
                    out.push((self.build(k, depth + 1)?, self.build(v, depth + 1)?));
                }
                if let Err(e) = check_keys(&out) {
                    return self.err(id, e.to_string());
                }
                Value::Dict(out)
            }
        };
        self.on_path[id] = false;
        Ok(value)
    }

    /// Starts building container `id` at `depth`, refusing cycles, depth and budget overruns.
    fn enter(&mut self, id: usize, depth: usize) -> Result<()> {
        if self.on_path[id] {
            let t = self.nodes[id].type_name();
            return self.err(id, format!("this {t} contains itself"));
        }
        if depth >= MAX_DEPTH {
            return self.err(id, format!("containers nested deeper than {MAX_DEPTH}"));
        }
        self.spend(id, 0)?;
        self.on_path[id] = true;
        Ok(())
    }

    fn build_all(&mut self, items: &[usize], depth: usize) -> Result<Vec<Value>> {
        let mut out = Vec::with_capacity(items.len().min(self.values_left));
        for &i in items {
            out.push(self.build(i, depth + 1)?);
        }
        Ok(out)
    }
}
