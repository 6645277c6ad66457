//! Interop of pilot's pickle subset and container with CPython's `pickle` (standard library only):
//! pilot writes, Python loads with openpilot's `load_oob`; Python writes (protocols 2 to 5, and an
//! openpilot-style out-of-band container), pilot reads; Python pickles of code are refused.

use std::path::Path;
use std::process::Command;

use pilot_core::artifact::container::{self, Record, ALIGN};
use pilot_core::artifact::pickle::{self, Value};
use serde_json::{json, Value as J};

/// Describes Python objects as JSON, refusing any type that is not a plain-data builtin.
const PY_PRELUDE: &str = r#"
import io, json, os, pickle, struct, sys
ALLOWED = {dict, list, tuple, str, bytes, int, float, bool, type(None), pickle.PickleBuffer}
types = set()
def desc(x):
    t = type(x)
    types.add(t.__name__)
    assert t in ALLOWED, f"non-builtin type {t!r}"
    if t is dict: return {"dict": [[desc(k), desc(v)] for k, v in x.items()]}
    if t is list: return {"list": [desc(v) for v in x]}
    if t is tuple: return {"tuple": [desc(v) for v in x]}
    if t is str: return {"str": x}
    if t is bytes: return {"bytes": x.hex()}
    if t is bool: return {"bool": x}
    if t is int: return {"int": str(x)}
    if t is float: return {"float": struct.pack('>d', x).hex()}
    if x is None: return {"none": None}
    return {"buffer": bytes(x.raw()).hex()}
"#;

/// openpilot's reader, verbatim, then the same load through the pure-Python unpickler (which
/// also enforces the framing rules).
const PY_LOAD: &str = r#"
def load_oob(f):
    n = struct.unpack('<q', f.read(8))[0]
    opcodes = f.read(n)
    def gen():
        while True:
            hdr = f.read(8)
            if not hdr: return
            sz = struct.unpack('<q', hdr)[0]
            buf = bytearray(sz); f.readinto(buf)
            yield pickle.PickleBuffer(buf)
    return pickle.load(io.BytesIO(opcodes), buffers=gen())

path = sys.argv[1]
with open(path, 'rb') as f:
    obj = load_oob(f)
    consumed_all = f.tell() == os.path.getsize(path)
value = desc(obj)
with open(path, 'rb') as f:
    n = struct.unpack('<q', f.read(8))[0]
    opcodes = f.read(n)
    bufs = []
    while hdr := f.read(8):
        bufs.append(pickle.PickleBuffer(bytearray(f.read(struct.unpack('<q', hdr)[0]))))
    pure = pickle._Unpickler(io.BytesIO(opcodes), buffers=iter(bufs)).load()
print(json.dumps({"value": value, "pure": desc(pure), "types": sorted(types), "consumed_all": consumed_all}))
"#;

/// Writes plain-data pickles at protocols 2 to 5, an openpilot-style out-of-band container, and
/// pickles of code; prints what each file holds.
const PY_DUMP: &str = r#"
import pickletools
out = sys.argv[1]
def payload(proto):
    obj = {
        "format": "pilot",
        "version": 1,
        "tensors": [{"name": f"t{i}", "shape": [1, i, 3], "dtype": "float32"} for i in range(50)],
        "big": list(range(2500)),
        "nested": {"t": (1, (2, (3, ("four", None, True, False))), -7),
                   "f": [1.5, -0.0, float("inf"), -1e300, 5e-324],
                   "ints": [2**31, -2**31 - 1, 2**63 - 1, -2**63, 65536, 65535, 255, 256, -1]},
        "empty": [[], {}, ()],
        (1, "k", None): "tuple key",
        7: False,
        "uni": "ünïcødé 模型 🚗",
        "long": "y" * 70000,
    }
    if proto >= 3:
        obj["bytes"] = b"\x00\x01"
        obj["bigbytes"] = bytes(range(256)) * 300
    return obj
files = []
def record(name, data, obj, kind):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
    ops = sorted({op.name for op, _, _ in pickletools.genops(data[8:] if kind == "oob" else data)})
    files.append({"name": name, "kind": kind, "desc": desc(obj) if obj is not None else None, "ops": ops})
for proto in (2, 3, 4, 5):
    obj = payload(proto)
    record(f"plain{proto}.pkl", pickle.dumps(obj, protocol=proto), obj, "plain")
# Protocol 5 with out-of-band buffers, written the way openpilot's dump_oob does.
obj = payload(5)
obj["buffers"] = [pickle.PickleBuffer(b"readonly bytes"), pickle.PickleBuffer(bytearray(b"writable")),
                  pickle.PickleBuffer(bytearray(100000))]
recs = io.BytesIO()
def cb(pb):
    raw = pb.raw()
    recs.write(struct.pack('<q', raw.nbytes))
    recs.write(raw)
data = pickle.dumps(obj, protocol=5, buffer_callback=cb)
record("oob5.pkl", struct.pack('<q', len(data)) + data + recs.getvalue(), obj, "oob")
class C:
    pass
for proto in (2, 3, 4, 5):
    for what, thing in (("object", object()), ("print", print), ("instance", C()), ("class", C)):
        record(f"code_{what}{proto}.pkl", pickle.dumps(thing, protocol=proto), None, "code")
print(json.dumps(files))
"#;

fn python(script: &str, arg: &Path) -> J {
    let full = format!("{PY_PRELUDE}{script}");
    let out = Command::new("python3")
        .arg("-c")
        .arg(&full)
        .arg(arg)
        .output()
        .expect("these interop tests need the system python3 (standard library only) on PATH");
    assert!(out.status.success(), "python3 failed:\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("python3 printed JSON")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The JSON the Python prelude's `desc` prints for the same object; `buffer(n)` gives the n-th
/// out-of-band buffer's bytes.
fn desc(v: &Value, buffer: &dyn Fn(u32) -> Vec<u8>) -> J {
    match v {
        Value::None => json!({ "none": null }),
        Value::Bool(b) => json!({ "bool": b }),
        Value::Int(i) => json!({ "int": i.to_string() }),
        Value::Float(f) => json!({ "float": format!("{:016x}", f.to_bits()) }),
        Value::Str(s) => json!({ "str": s }),
        Value::Bytes(b) => json!({ "bytes": hex(b) }),
        Value::Buffer(n) => json!({ "buffer": hex(&buffer(*n)) }),
        Value::List(items) => {
            json!({ "list": items.iter().map(|i| desc(i, buffer)).collect::<Vec<_>>() })
        }
        Value::Tuple(items) => {
            json!({ "tuple": items.iter().map(|i| desc(i, buffer)).collect::<Vec<_>>() })
        }
        Value::Dict(entries) => json!({
            "dict": entries.iter().map(|(k, v)| json!([desc(k, buffer), desc(v, buffer)])).collect::<Vec<_>>()
        }),
    }
}

fn s(x: &str) -> Value {
    Value::str(x)
}

#[test]
fn python_loads_what_pilot_writes() {
    let blobs: [Vec<u8>; 3] = [(0..=255).collect(), vec![0xab; 100_003], b"third blob".to_vec()];
    let tensors = (0..1500)
        .map(|i| {
            Value::Dict(vec![
                (s("name"), s(&format!("t{i}"))),
                (s("shape"), Value::List(vec![Value::Int(1), Value::Int(i)])),
                (s("dtype"), s("float16")),
            ])
        })
        .collect();
    let payload = Value::Dict(vec![
        (s("format"), s("pilot")),
        (s("version"), Value::Int(1)),
        (s("records"), Value::List((0..6).map(Value::Buffer).collect())),
        (s("_pad"), Value::List(vec![Value::Int(0), Value::Int(2), Value::Int(4)])),
        (s("weights"), Value::Dict(vec![(s("a"), Value::Int(1)), (s("b"), Value::Int(3)), (s("c"), Value::Int(5))])),
        (
            s("nested"),
            Value::Dict(vec![
                (
                    s("tuple"),
                    Value::Tuple(vec![
                        Value::Int(i64::MIN),
                        Value::Int(i64::MAX),
                        Value::Float(-0.0),
                        Value::Float(f64::INFINITY),
                        s("ünï 模型 🚗"),
                        Value::None,
                        Value::Bool(true),
                        Value::Tuple(vec![]),
                    ]),
                ),
                (s("tensors"), Value::List(tensors)),
                (Value::Tuple(vec![Value::Int(1), s("k")]), Value::Bytes(vec![0, 1, 2, 255])),
                (Value::Int(-7), Value::Bool(false)),
                (Value::None, Value::Dict(vec![])),
            ]),
        ),
        (s("long"), s(&"z".repeat(100_000))),
    ]);
    let bytes = pickle::write(&payload).unwrap();
    let records = [
        Record::Pad,
        Record::Data(&blobs[0]),
        Record::Pad,
        Record::Data(&blobs[1]),
        Record::Pad,
        Record::Data(&blobs[2]),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.pkl");
    container::write(&path, &bytes, &records).unwrap();

    let file = std::fs::read(&path).unwrap();
    let c = container::parse(&file).unwrap();
    assert_eq!(c.records.len(), 6);
    for (i, blob) in blobs.iter().enumerate() {
        let r = &c.records[2 * i + 1];
        assert_eq!(r.start as u64 % ALIGN, 0, "data record {} is not {ALIGN}-byte aligned", 2 * i + 1);
        assert_eq!(&file[r.clone()], &blob[..]);
        assert!(c.records[2 * i].len() < ALIGN as usize);
    }
    let record = |n: u32| file[c.records[n as usize].clone()].to_vec();

    let py = python(PY_LOAD, &path);
    let expected = desc(&payload, &record);
    assert_eq!(py["value"], expected, "what Python loaded differs from what pilot wrote");
    assert_eq!(py["pure"], expected, "the pure-Python unpickler disagrees");
    assert_eq!(py["consumed_all"], json!(true), "Python did not consume every record");
    let allowed = ["dict", "list", "tuple", "str", "bytes", "int", "float", "bool", "NoneType", "PickleBuffer"];
    let types = py["types"].as_array().unwrap();
    assert!(types.iter().all(|t| allowed.contains(&t.as_str().unwrap())), "{types:?}");
    assert!(types.contains(&json!("PickleBuffer")));
}

#[test]
fn pilot_reads_what_python_writes() {
    let dir = tempfile::tempdir().unwrap();
    let files = python(PY_DUMP, dir.path());
    let files = files.as_array().unwrap();
    let mut seen = (0, 0, 0);
    for f in files {
        let name = f["name"].as_str().unwrap();
        let kind = f["kind"].as_str().unwrap();
        let ops: Vec<&str> = f["ops"].as_array().unwrap().iter().map(|o| o.as_str().unwrap()).collect();
        let bytes = std::fs::read(dir.path().join(name)).unwrap();
        match kind {
            "plain" => {
                seen.0 += 1;
                let p = pickle::read(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(p.buffer_count, 0);
                assert_eq!(desc(&p.value, &|_| unreachable!()), f["desc"], "{name}");
                assert!(ops.contains(&"BINGET") && ops.contains(&"APPENDS"), "{name}: {ops:?}");
                let big = p.value.get("big").unwrap();
                assert!(matches!(big, Value::List(items) if items.len() == 2500 && items[2499] == Value::Int(2499)));
                let proto: u32 = name[5..6].parse().unwrap();
                let memo_op = if proto >= 4 { "MEMOIZE" } else { "BINPUT" };
                assert!(ops.contains(&memo_op), "{name}: {ops:?}");
                assert_eq!(ops.contains(&"FRAME"), proto >= 4, "{name}: {ops:?}");
            }
            "oob" => {
                seen.1 += 1;
                let c = container::parse(&bytes).unwrap();
                let p = pickle::read(&bytes[c.pickle.clone()]).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(p.buffer_count, 3);
                assert_eq!(c.records.len(), 3);
                let record = |n: u32| bytes[c.records[n as usize].clone()].to_vec();
                assert_eq!(desc(&p.value, &record), f["desc"], "{name}");
                assert!(ops.contains(&"NEXT_BUFFER") && ops.contains(&"READONLY_BUFFER"), "{ops:?}");
            }
            _ => {
                seen.2 += 1;
                let e = pickle::read(&bytes).expect_err(name).to_string();
                assert!(e.starts_with("pickle offset "), "{name}: {e}");
                assert!(
                    e.contains("(GLOBAL) is not allowed") || e.contains("(STACK_GLOBAL) is not allowed"),
                    "{name}: {e}"
                );
            }
        }
    }
    assert_eq!(seen, (4, 1, 16));
}
