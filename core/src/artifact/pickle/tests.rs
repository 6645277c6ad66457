use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::opcodes::*;
use super::*;

fn s(x: &str) -> Value {
    Value::str(x)
}

/// Equality that tells -0.0 from 0.0 (and compares floats by bits).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        (Value::List(x), Value::List(y)) | (Value::Tuple(x), Value::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Dict(x), Value::Dict(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((k1, v1), (k2, v2))| same(k1, k2) && same(v1, v2))
        }
        _ => a == b,
    }
}

fn round_trip(v: &Value) -> Vec<u8> {
    let bytes = write(v).unwrap();
    let p = read(&bytes).unwrap_or_else(|e| panic!("{e}"));
    assert!(same(&p.value, v), "{:?}\n!=\n{:?}", p.value, v);
    bytes
}

/// A pickle body wrapped in PROTO 5 and STOP, unframed.
fn pk(body: &[u8]) -> Vec<u8> {
    [&[PROTO, 5][..], body, &[STOP]].concat()
}

fn err(bytes: &[u8]) -> PickleError {
    match read(bytes) {
        Ok(p) => panic!("accepted: {:?}", p.value),
        Err(e) => e,
    }
}

fn assert_err(bytes: &[u8], offset: usize, needle: &str) {
    let e = err(bytes);
    assert_eq!(e.offset, offset, "{e}");
    assert!(e.to_string().contains(needle), "{e:?} lacks {needle:?}");
    assert!(e.to_string().starts_with(&format!("pickle offset {offset}: ")), "{e}");
}

fn nested(depth: usize) -> Value {
    let mut v = Value::Int(1);
    for _ in 0..depth {
        v = Value::List(vec![v]);
    }
    v
}

#[test]
fn round_trips_every_kind() {
    let ints = [
        0,
        1,
        255,
        256,
        65535,
        65536,
        -1,
        -256,
        i32::MAX as i64,
        i32::MIN as i64,
        i32::MAX as i64 + 1,
        i32::MIN as i64 - 1,
        1 << 40,
        -(1 << 40),
        i64::MAX,
        i64::MIN,
    ];
    let floats = [0.0, -0.0, 1.5, -2.25e300, f64::INFINITY, f64::NEG_INFINITY, f64::MAX, f64::MIN_POSITIVE, 5e-324];
    let v = Value::Dict(vec![
        (s("none"), Value::None),
        (s("bools"), Value::List(vec![Value::Bool(true), Value::Bool(false)])),
        (s("ints"), Value::List(ints.iter().map(|&i| Value::Int(i)).collect())),
        (s("floats"), Value::Tuple(floats.iter().map(|&f| Value::Float(f)).collect())),
        (s("unicode ünïcødé 模型 🚗"), s("\u{0}\u{7f}\u{80}\u{ffff}\u{10ffff}")),
        (s(""), Value::Bytes(vec![])),
        (Value::Int(-5), Value::Bytes((0..=255).collect())),
        (Value::Bool(false), Value::Bytes(vec![0; 300])),
        (Value::None, Value::Tuple(vec![])),
        (Value::Tuple(vec![Value::Int(1), s("a"), Value::Tuple(vec![Value::None])]), Value::List(vec![])),
        (Value::Bytes(b"k".to_vec()), Value::Dict(vec![])),
        (s("tuples"), Value::List((0..6).map(|n| Value::Tuple((0..n).map(Value::Int).collect())).collect())),
        (s("buffers"), Value::List(vec![Value::Buffer(0), Value::Tuple(vec![Value::Buffer(1), Value::Buffer(2)])])),
        (s("nested"), nested(MAX_DEPTH - 1)),
    ]);
    let bytes = round_trip(&v);
    assert_eq!(read(&bytes).unwrap().buffer_count, 3);
    assert_eq!(&bytes[..2], &[PROTO, 5]);
    assert_eq!(bytes[2], FRAME);
}

#[test]
fn batches_lists_and_dicts_like_cpython() {
    for n in [1, 2, 999, 1000, 1001, 2500] {
        let list = Value::List((0..n).map(Value::Int).collect());
        let dict = Value::Dict((0..n).map(|i| (Value::Int(i), Value::Int(-i))).collect());
        round_trip(&list);
        round_trip(&dict);
        let bytes = write(&list).unwrap();
        let appends = bytes.iter().filter(|&&b| b == APPENDS).count();
        assert!(appends >= n as usize / 1000, "n={n}");
    }
}

#[test]
fn repeated_strings_use_the_memo() {
    let key = "a_rather_long_key_name";
    let v = Value::List(
        (0..300).map(|i| Value::Dict(vec![(s(key), Value::Int(i)), (s(&format!("k{i}")), Value::None)])).collect(),
    );
    let bytes = round_trip(&v);
    let occurrences = bytes.windows(key.len()).filter(|w| *w == key.as_bytes()).count();
    assert_eq!(occurrences, 1);
    assert!(bytes.contains(&BINGET) && bytes.contains(&LONG_BINGET));
}

#[test]
fn frames_split_large_payloads() {
    let many = Value::List((0..50_000).map(|i| s(&format!("item number {i}"))).collect());
    let bytes = round_trip(&many);
    assert!(bytes.len() > 3 * 65536);
    let big = Value::Tuple(vec![
        s(&"x".repeat(200_000)),
        Value::Bytes(vec![9; 100_000]),
        Value::Bytes(vec![1; 70_000]),
        s("after"),
    ]);
    round_trip(&big);
    let huge = Value::Bytes(vec![3; 5 << 20]);
    round_trip(&huge);
}

#[test]
fn writer_refuses_bad_values() {
    let out_of_order = Value::List(vec![Value::Buffer(1), Value::Buffer(0)]);
    assert_eq!(write(&out_of_order), Err(WriteError::BufferOrder { expected: 0, found: 1 }));
    let twice = Value::List(vec![Value::Buffer(0), Value::Buffer(0)]);
    assert_eq!(write(&twice), Err(WriteError::BufferOrder { expected: 1, found: 0 }));
    assert_eq!(write(&nested(MAX_DEPTH + 1)), Err(WriteError::TooDeep));
    assert!(write(&nested(MAX_DEPTH)).is_ok());
    for key in [Value::List(vec![]), Value::Float(1.0), Value::Tuple(vec![Value::Dict(vec![])]), Value::Buffer(0)] {
        let v = Value::Dict(vec![(key, Value::None)]);
        assert!(matches!(write(&v), Err(WriteError::Key(_))), "{v:?}");
    }
    let dup = Value::Dict(vec![(Value::Int(1), Value::None), (Value::Bool(true), Value::None)]);
    assert!(matches!(write(&dup), Err(WriteError::Key(m)) if m.contains("duplicate")));
}

#[test]
fn reader_refuses_code_opcodes_by_name() {
    assert_err(&pk(b"cbuiltins\nprint\n"), 2, "opcode 0x63 'c' (GLOBAL) is not allowed: artifacts are plain data");
    let refused = [
        (STACK_GLOBAL_BYTE, "STACK_GLOBAL"),
        (b'R', "REDUCE"),
        (b'b', "BUILD"),
        (b'i', "INST"),
        (b'o', "OBJ"),
        (0x81, "NEWOBJ"),
        (0x92, "NEWOBJ_EX"),
        (b'P', "PERSID"),
        (b'Q', "BINPERSID"),
        (0x82, "EXT1"),
        (0x96, "BYTEARRAY8"),
        (b'I', "INT"),
        (b'S', "STRING"),
        (b'V', "UNICODE"),
        (b'l', "LIST"),
        (b'd', "DICT"),
        (b'g', "GET"),
        (b'p', "PUT"),
        (b'2', "DUP"),
        (0x8b, "LONG4"),
        (0x8f, "EMPTY_SET"),
        (0xff, "not an opcode"),
    ];
    for (op, name) in refused {
        let bytes = pk(&[NONE, op]);
        assert_err(&bytes, 3, &format!("opcode 0x{op:02x}"));
        assert_err(&bytes, 3, &format!("({name})"));
    }
}

const STACK_GLOBAL_BYTE: u8 = 0x93;

#[test]
fn reader_is_strict_about_structure() {
    let short = |s: &str| [&[SHORT_BINUNICODE, s.len() as u8][..], s.as_bytes()].concat();
    assert_err(&[PROTO, 5, NONE], 3, "without STOP");
    assert_err(&[], 0, "without STOP");
    assert_err(&[PROTO, 5, NONE, STOP, 0], 3, "1 trailing bytes");
    assert_err(&[NONE, STOP], 0, "not PROTO");
    assert_err(&[PROTO, 6, NONE, STOP], 0, "unsupported protocol 6");
    assert_err(&[PROTO, 1, NONE, STOP], 0, "unsupported protocol 1");
    assert_err(&pk(&[NONE, PROTO, 5]), 3, "PROTO after");
    assert_err(&pk(&[SHORT_BINUNICODE, 2, 0xc3, 0x28]), 2, "UTF-8");
    assert_err(&pk(&[SHORT_BINUNICODE, 200, b'a']), 2, "truncated");
    assert_err(&pk(&[BINUNICODE, 0xff, 0xff, 0xff, 0xff]), 2, "truncated");
    assert_err(&pk(&[BINBYTES8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]), 2, "exceeds");
    assert_err(&pk(&[BINUNICODE8, 0, 0, 0, 0, 0, 0, 0, 0x80]), 2, "exceeds");
    assert_err(&pk(&[LONG1, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9]), 2, "does not fit");
    assert_eq!(read(&pk(&[LONG1, 8, 0, 0, 0, 0, 0, 0, 0, 0x80])).unwrap().value, Value::Int(i64::MIN));
    assert_eq!(read(&pk(&[LONG1, 1, 0xfe])).unwrap().value, Value::Int(-2));
    assert_eq!(read(&pk(&[LONG1, 0])).unwrap().value, Value::Int(0));
    assert_err(&pk(&[BINGET, 0]), 2, "memo index 0 is not defined");
    assert_err(&pk(&[MEMOIZE]), 2, "needs a value");
    assert_err(&pk(&[NONE, MARK, MEMOIZE]), 4, "above the last MARK");
    assert_err(&pk(&[MARK, NONE]), 4, "MARK still open");
    assert_err(&pk(&[NONE, NONE]), 4, "2 values");
    assert_err(&pk(&[]), 2, "0 values");
    assert_err(&pk(&[NONE, READONLY_BUFFER]), 3, "READONLY_BUFFER on a None");
    assert_err(&pk(&[EMPTY_DICT, NONE, APPEND]), 4, "appends to a dict");
    assert_err(&pk(&[EMPTY_LIST, NONE, NONE, SETITEM]), 5, "sets items on a list");
    assert_err(&pk(&[EMPTY_DICT, MARK, NONE, SETITEMS]), 5, "odd number");
    assert_err(&pk(&[APPENDS]), 2, "no MARK");
    assert_err(&pk(&[NONE, TUPLE2]), 3, "needs 2 values");
    assert_err(&pk(&[EMPTY_DICT, EMPTY_LIST, NONE, SETITEM]), 5, "dict key of type list");
    assert_err(&pk(&[EMPTY_DICT, EMPTY_LIST, TUPLE1, NONE, SETITEM]), 6, "dict key of type tuple");
    assert_err(&pk(&[EMPTY_DICT, NEXT_BUFFER, NONE, SETITEM]), 5, "PickleBuffer");
    let dup = [&[EMPTY_DICT, MARK, NEWTRUE, NONE, BININT1, 1, NONE][..], &[SETITEMS]].concat();
    assert_err(&pk(&dup), 2, "duplicate dict key");
    let dup = [&[EMPTY_DICT, MARK][..], &short("k"), &[NONE], &short("k"), &[NONE, SETITEMS]].concat();
    assert_err(&pk(&dup), 2, "duplicate dict key");
    assert_err(&pk(&[EMPTY_LIST, MEMOIZE, BINGET, 0, APPEND]), 2, "list contains itself");
    // Frames: lengths are checked, opcodes may not straddle them, and frames may not nest.
    assert_err(&[PROTO, 5, FRAME, 100, 0, 0, 0, 0, 0, 0, 0, NONE, STOP], 2, "exceeds");
    assert_err(&[PROTO, 5, FRAME, 2, 0, 0, 0, 0, 0, 0, 0, BININT2, 7, 0, STOP], 11, "past the end of its FRAME");
    let nested_frame =
        [&[PROTO, 5, FRAME, 10, 0, 0, 0, 0, 0, 0, 0, FRAME][..], &[1, 0, 0, 0, 0, 0, 0, 0, NONE, STOP]].concat();
    assert_err(&nested_frame, 11, "FRAME before the end");
    let ok = [PROTO, 5, FRAME, 3, 0, 0, 0, 0, 0, 0, 0, BININT1, 7, STOP];
    assert_eq!(read(&ok).unwrap().value, Value::Int(7));
}

#[test]
fn reader_accepts_cpython_extras() {
    let short = |s: &str| [&[SHORT_BINUNICODE, s.len() as u8][..], s.as_bytes()].concat();
    // Protocol 2 style memo (BINPUT/LONG_BINPUT), POP, POP_MARK, READONLY_BUFFER on a buffer.
    let body = [
        &[MARK][..],
        &short("x"),
        &[BINPUT, 7, NONE, POP],
        &[MARK, NONE, NONE, POP_MARK],
        &[LONG_BINPUT, 0, 1, 0, 0],
        &[NEXT_BUFFER, READONLY_BUFFER, BINGET, 7, LONG_BINGET, 0, 1, 0, 0, TUPLE],
    ]
    .concat();
    let p = read(&[&[PROTO, 2][..], &body, &[STOP]].concat()).unwrap();
    assert_eq!(p.value, Value::Tuple(vec![s("x"), Value::Buffer(0), s("x"), s("x")]));
    assert_eq!(p.buffer_count, 1);
    // Shared mutable containers: the memo holds the list itself, so later appends show through.
    let body = [EMPTY_LIST, MEMOIZE, POP, BINGET, 0, BININT1, 5, APPEND, POP, BINGET, 0, BINGET, 0, TUPLE2];
    let v = read(&pk(&body)).unwrap().value;
    let five = Value::List(vec![Value::Int(5)]);
    assert_eq!(v, Value::Tuple(vec![five.clone(), five]));
    // POP on an empty segment pops the MARK, as CPython does.
    assert_eq!(read(&pk(&[NONE, MARK, POP])).unwrap().value, Value::None);
}

#[test]
fn memo_bomb_is_refused_quickly() {
    let mut body = vec![EMPTY_LIST, MEMOIZE, MARK];
    body.extend([BININT1, 1].repeat(10));
    body.extend([APPENDS, POP]);
    for level in 1..40u8 {
        body.extend([EMPTY_LIST, MEMOIZE, MARK]);
        body.extend([BINGET, level - 1].repeat(10));
        body.extend([APPENDS, POP]);
    }
    body.extend([BINGET, 39]);
    let start = Instant::now();
    let e = err(&pk(&body));
    assert!(e.reason.contains("budget"), "{e}");
    assert!(start.elapsed() < Duration::from_secs(5));
    // Big strings repeated by reference are bounded by bytes, not just values.
    let mut body = vec![BINBYTES8];
    body.extend((1u64 << 20).to_le_bytes());
    body.extend(vec![0; 1 << 20]);
    body.extend([MEMOIZE, POP, MARK]);
    body.extend([BINGET, 0].repeat(100));
    body.push(TUPLE);
    let e = err(&pk(&body));
    assert!(e.reason.contains("budget"), "{e}");
}

#[test]
fn deep_nesting_is_refused_without_overflow() {
    let n = 100_000;
    let mut lists = vec![EMPTY_LIST; n];
    lists.extend(vec![APPEND; n - 1]);
    assert_err(&pk(&lists), 2 + MAX_DEPTH, "nested deeper than 256");
    let mut tuples = vec![EMPTY_TUPLE];
    tuples.extend(vec![TUPLE1; n]);
    assert!(err(&pk(&tuples)).reason.contains("nested deeper"));
    let mut dicts = [EMPTY_DICT, NONE].repeat(n - 1);
    dicts.push(EMPTY_DICT);
    dicts.extend(vec![SETITEM; n - 1]);
    assert_err(&pk(&dicts), 2 + 2 * MAX_DEPTH, "nested deeper than 256");
    let marks = vec![MARK; n];
    assert!(err(&pk(&marks)).reason.contains("MARK"));
    let mut key = vec![EMPTY_DICT, EMPTY_TUPLE];
    key.extend(vec![TUPLE1; n]);
    key.extend([NONE, SETITEM]);
    assert!(err(&pk(&key)).reason.contains("nested deeper"));
}

fn key_strategy() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::None),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        "[a-z_]{0,6}".prop_map(Value::Str),
        prop::collection::vec(any::<u8>(), 0..4).prop_map(Value::Bytes),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| prop::collection::vec(inner, 0..3).prop_map(Value::Tuple))
}

fn float_strategy() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("no NaN", |f| !f.is_nan()),
        prop::sample::select(vec![0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::MAX, f64::MIN, 5e-324]),
    ]
}

fn value_strategy() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::None),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        prop::sample::select(vec![0i64, 255, 256, 65535, 65536, -1, i64::MIN, i64::MAX, 1 << 31, -(1 << 31) - 1])
            .prop_map(Value::Int),
        float_strategy().prop_map(Value::Float),
        "(?s).{0,8}".prop_map(Value::Str),
        prop::sample::select(vec!["shape", "dtype", "name", "buffer"]).prop_map(s),
        prop::collection::vec(any::<u8>(), 0..12).prop_map(Value::Bytes),
        Just(Value::Buffer(0)),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::List),
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Tuple),
            prop::collection::vec((key_strategy(), inner), 0..6).prop_map(|entries| {
                let mut seen = std::collections::HashSet::new();
                let keep: Vec<bool> = entries.iter().map(|(k, _)| seen.insert(k.key().unwrap())).collect();
                Value::Dict(entries.into_iter().zip(keep).filter(|(_, keep)| *keep).map(|(e, _)| e).collect())
            }),
        ]
    })
    .prop_map(|mut v| {
        number_buffers(&mut v, &mut 0);
        v
    })
}

/// Renumbers buffers in the order the writer meets them.
fn number_buffers(v: &mut Value, next: &mut u32) {
    match v {
        Value::Buffer(n) => {
            *n = *next;
            *next += 1;
        }
        Value::List(items) | Value::Tuple(items) => items.iter_mut().for_each(|i| number_buffers(i, next)),
        Value::Dict(entries) => entries.iter_mut().for_each(|(_, v)| number_buffers(v, next)),
        _ => {}
    }
}

fn mutate(bytes: &mut Vec<u8>, edits: &[(prop::sample::Index, u8, u8)]) {
    for (at, x, kind) in edits {
        match kind % 4 {
            0 if !bytes.is_empty() => {
                let i = at.index(bytes.len());
                bytes[i] ^= x | 1;
            }
            1 => bytes.truncate(at.index(bytes.len() + 1)),
            2 => bytes.insert(at.index(bytes.len() + 1), *x),
            _ if !bytes.is_empty() => {
                bytes.remove(at.index(bytes.len()));
            }
            _ => {}
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn generated_values_round_trip(v in value_strategy(), pad in prop::collection::vec("[a-z]{1,3}", 0..3)) {
        let v = Value::Tuple(vec![v, Value::List(pad.into_iter().map(Value::Str).collect())]);
        round_trip(&v);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn mutated_pickles_never_panic(
        v in value_strategy(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), any::<u8>()), 1..4),
    ) {
        let mut bytes = write(&v).unwrap();
        mutate(&mut bytes, &edits);
        if let Ok(p) = read(&bytes) {
            prop_assert!(p.buffer_count as usize <= bytes.len());
        }
    }
}
