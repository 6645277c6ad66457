//! openpilot's `output_slices` metadata, decoded without unpickling.
//!
//! openpilot's ONNX models carry `metadata_props["output_slices"]`: base64 of a pickled
//! `dict[str, slice]` (openpilot `selfdrive/modeld/get_model_metadata.py` reads it with
//! `pickle.loads(codecs.decode(..., "base64"))`). A pickle is a program; running one from a model file
//! would run whatever it says. This decoder is a stack machine that knows only what CPython's pickler
//! emits for such a dict at protocols 2 to 5 — strings, small ints, None, tuples, memo puts and gets,
//! the one global `builtins.slice` (`__builtin__.slice` at protocol 2) and REDUCE of it — and refuses
//! every other opcode or global with its offset.

use std::collections::HashMap;

use base64::Engine;

/// One named slice of the model's flat output: elements `start..stop`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputSlice {
    pub name: String,
    pub start: usize,
    pub stop: usize,
}

#[derive(Clone, Debug)]
enum V {
    Str(String),
    Int(i64),
    None,
    SliceType,
    Tuple(Vec<V>),
    Slice(Option<i64>, Option<i64>, Option<i64>),
    Dict(Vec<(String, V)>),
}

impl V {
    fn kind(&self) -> &'static str {
        match self {
            V::Str(_) => "str",
            V::Int(_) => "int",
            V::None => "None",
            V::SliceType => "the slice type",
            V::Tuple(_) => "tuple",
            V::Slice(..) => "slice",
            V::Dict(_) => "dict",
        }
    }
}

/// Decodes the `output_slices` property (base64 of a pickled `dict[str, slice]`). Errors are one line.
pub fn decode(prop: &str) -> Result<Vec<OutputSlice>, String> {
    let bytes =
        base64::engine::general_purpose::STANDARD.decode(prop.trim()).map_err(|e| format!("not base64 ({e})"))?;
    let V::Dict(entries) = run(&bytes)? else { return Err("the pickle is not a dict".into()) };
    entries
        .into_iter()
        .map(|(name, v)| match v {
            V::Slice(start, Some(stop), None | Some(1)) => {
                let start = start.unwrap_or(0);
                if start < 0 || stop < start {
                    return Err(format!("`{name}`: slice({start}, {stop}) is not an ascending range of indices"));
                }
                Ok(OutputSlice { name, start: start as usize, stop: stop as usize })
            }
            V::Slice(..) => Err(format!("`{name}`: only slices with a stop and step 1 are supported")),
            other => Err(format!("`{name}`: expected a slice, found {}", other.kind())),
        })
        .collect()
}

/// Runs the pickle subset described in the module docs and returns the value it leaves.
fn run(b: &[u8]) -> Result<V, String> {
    let mut pos = 0usize;
    let mut stack: Vec<V> = Vec::new();
    let mut marks: Vec<usize> = Vec::new();
    let mut memo: HashMap<u32, V> = HashMap::new();
    let take = |pos: &mut usize, n: usize| -> Result<&[u8], String> {
        let s = b.get(*pos..pos.saturating_add(n)).ok_or_else(|| format!("offset {pos}: truncated"))?;
        *pos += n;
        Ok(s)
    };
    loop {
        let at = pos;
        let op = *take(&mut pos, 1)?.first().expect("one byte");
        let err = |reason: String| format!("offset {at}: {reason}");
        let pop = |stack: &mut Vec<V>| stack.pop().ok_or_else(|| err("stack underflow".into()));
        let u32_le = |s: &[u8]| u32::from_le_bytes(s.try_into().expect("4 bytes"));
        match op {
            0x80 => {
                take(&mut pos, 1)?;
            }
            0x95 => {
                take(&mut pos, 8)?;
            }
            b'}' => stack.push(V::Dict(Vec::new())),
            b')' => stack.push(V::Tuple(Vec::new())),
            b'(' => marks.push(stack.len()),
            b'N' => stack.push(V::None),
            b'K' => stack.push(V::Int(take(&mut pos, 1)?[0] as i64)),
            b'M' => stack.push(V::Int(u16::from_le_bytes(take(&mut pos, 2)?.try_into().expect("2")) as i64)),
            b'J' => stack.push(V::Int(i32::from_le_bytes(take(&mut pos, 4)?.try_into().expect("4")) as i64)),
            0x8a => {
                let n = take(&mut pos, 1)?[0] as usize;
                if n > 8 {
                    return Err(err(format!("LONG1 of {n} bytes does not fit 64 bits")));
                }
                let s = take(&mut pos, n)?;
                let mut v: i64 = if s.last().is_some_and(|&x| x & 0x80 != 0) { -1 } else { 0 };
                for &x in s.iter().rev() {
                    v = (v << 8) | x as i64;
                }
                stack.push(V::Int(v));
            }
            0x8c | b'X' => {
                let n = if op == 0x8c { take(&mut pos, 1)?[0] as usize } else { u32_le(take(&mut pos, 4)?) as usize };
                let s = std::str::from_utf8(take(&mut pos, n)?).map_err(|_| err("string is not UTF-8".into()))?;
                stack.push(V::Str(s.to_string()));
            }
            0x94 | b'q' | b'r' => {
                let key = match op {
                    0x94 => memo.len() as u32,
                    b'q' => take(&mut pos, 1)?[0] as u32,
                    _ => u32_le(take(&mut pos, 4)?),
                };
                let top = stack.last().ok_or_else(|| err("memo put on an empty stack".into()))?;
                memo.insert(key, top.clone());
            }
            b'h' | b'j' => {
                let key = if op == b'h' { take(&mut pos, 1)?[0] as u32 } else { u32_le(take(&mut pos, 4)?) };
                let v = memo.get(&key).ok_or_else(|| err(format!("memo {key} was never put")))?;
                // Only scalars are shared: a container fetched again could expand exponentially.
                if matches!(v, V::Tuple(_) | V::Dict(_)) {
                    return Err(err(format!("memo get of a {} is not supported", v.kind())));
                }
                stack.push(v.clone());
            }
            0x93 | b'c' => {
                let (module, name) = if op == 0x93 {
                    let name = pop(&mut stack)?;
                    let module = pop(&mut stack)?;
                    match (module, name) {
                        (V::Str(m), V::Str(n)) => (m, n),
                        _ => return Err(err("STACK_GLOBAL needs two strings".into())),
                    }
                } else {
                    let mut line = || -> Result<String, String> {
                        let rest = &b[pos.min(b.len())..];
                        let end =
                            rest.iter().position(|&c| c == b'\n').ok_or_else(|| err("GLOBAL truncated".into()))?;
                        let s = String::from_utf8_lossy(&rest[..end]).into_owned();
                        pos += end + 1;
                        Ok(s)
                    };
                    (line()?, line()?)
                };
                if !matches!(module.as_str(), "builtins" | "__builtin__") || name != "slice" {
                    return Err(err(format!("refuses the global {module}.{name} (only builtins.slice)")));
                }
                stack.push(V::SliceType);
            }
            0x85..=0x87 | b't' => {
                let from = match op {
                    b't' => marks.pop().ok_or_else(|| err("TUPLE without MARK".into()))?,
                    n => stack.len().checked_sub((n - 0x84) as usize).ok_or_else(|| err("stack underflow".into()))?,
                };
                if from > stack.len() || marks.last().is_some_and(|&m| m > from) {
                    return Err(err("stack underflow".into()));
                }
                let items = stack.split_off(from);
                stack.push(V::Tuple(items));
            }
            b'R' => {
                let args = pop(&mut stack)?;
                let callable = pop(&mut stack)?;
                let (V::SliceType, V::Tuple(args)) = (&callable, &args) else {
                    return Err(err(format!("REDUCE of {} is not supported", callable.kind())));
                };
                let bound = |v: &V| match v {
                    V::Int(i) => Ok(Some(*i)),
                    V::None => Ok(None),
                    other => Err(err(format!("slice bound is {}", other.kind()))),
                };
                let s = match args.as_slice() {
                    [stop] => V::Slice(None, bound(stop)?, None),
                    [start, stop] => V::Slice(bound(start)?, bound(stop)?, None),
                    [start, stop, step] => V::Slice(bound(start)?, bound(stop)?, bound(step)?),
                    _ => return Err(err(format!("slice() takes 1 to 3 arguments, {} given", args.len()))),
                };
                stack.push(s);
            }
            b's' | b'u' => {
                let from = if op == b'u' {
                    marks.pop().ok_or_else(|| err("SETITEMS without MARK".into()))?
                } else {
                    stack.len().checked_sub(2).ok_or_else(|| err("stack underflow".into()))?
                };
                if from == 0 || from > stack.len() || !(stack.len() - from).is_multiple_of(2) {
                    return Err(err("SETITEMS needs a dict and key/value pairs".into()));
                }
                let items = stack.split_off(from);
                let Some(V::Dict(entries)) = stack.last_mut() else {
                    return Err(err("SETITEM target is not a dict".into()));
                };
                let mut it = items.into_iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    let V::Str(k) = k else { return Err(err(format!("dict key is {}, expected str", k.kind()))) };
                    if entries.iter().any(|(e, _)| *e == k) {
                        return Err(err(format!("duplicate key `{k}`")));
                    }
                    entries.push((k, v));
                }
            }
            b'.' => {
                if pos != b.len() || stack.len() != 1 || !marks.is_empty() {
                    return Err(err("STOP must end the stream with exactly one value".into()));
                }
                return pop(&mut stack);
            }
            other => return Err(err(format!("opcode 0x{other:02x} is not supported"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    /// `pickle.dumps({"plan": slice(0, 33), "hidden_state": slice(33, 545)}, protocol=P)` from CPython 3.11.
    const PROTO4: &[u8] = b"\x80\x04\x95E\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x04plan\x94\x8c\x08builtins\x94\x8c\x05slice\x94\x93\x94K\x00K!N\x87\x94R\x94\x8c\x0chidden_state\x94h\x04K!M!\x02N\x87\x94R\x94u.";
    const PROTO2: &[u8] = b"\x80\x02}q\x00(X\x04\x00\x00\x00planq\x01c__builtin__\nslice\nq\x02K\x00K!N\x87q\x03Rq\x04X\x0c\x00\x00\x00hidden_stateq\x05h\x02K!M!\x02N\x87q\x06Rq\x07u.";

    fn expected() -> Vec<OutputSlice> {
        vec![
            OutputSlice { name: "plan".into(), start: 0, stop: 33 },
            OutputSlice { name: "hidden_state".into(), start: 33, stop: 545 },
        ]
    }

    #[test]
    fn decodes_cpython_pickles_of_slice_dicts() {
        assert_eq!(decode(&b64(PROTO4)).unwrap(), expected());
        assert_eq!(decode(&b64(PROTO2)).unwrap(), expected());
    }

    #[test]
    fn refuses_other_globals_and_opcodes() {
        let evil = b"\x80\x04\x8c\x02os\x8c\x06system\x93\x8c\x02id\x85R.";
        assert!(decode(&b64(evil)).unwrap_err().contains("refuses the global os.system"));
        let build = b"\x80\x04}b.";
        assert!(decode(&b64(build)).unwrap_err().contains("opcode 0x62"));
        assert!(decode("%%%").unwrap_err().contains("not base64"));
        assert!(decode(&b64(b"\x80\x04K\x01.")).unwrap_err().contains("not a dict"));
        assert!(decode(&b64(&PROTO4[..PROTO4.len() - 3])).unwrap_err().contains("truncated"));
    }

    #[test]
    fn refuses_slices_that_are_not_ranges() {
        let negative = b"\x80\x04}\x8c\x01a\x8c\x08builtins\x8c\x05slice\x93J\xff\xff\xff\xffK\x02\x86Rs.";
        assert!(decode(&b64(negative)).unwrap_err().contains("not an ascending range"));
        let stepped = b"\x80\x04}\x8c\x01a\x8c\x08builtins\x8c\x05slice\x93K\x00K\x02K\x02\x87Rs.";
        assert!(decode(&b64(stepped)).unwrap_err().contains("step 1"));
    }
}
