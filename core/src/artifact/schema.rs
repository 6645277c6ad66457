//! The typed payload, version 2, and its first verification pass (structure and bounds).
//!
//! ```text
//! {"format": "pilot", "version": 2,
//!  "target":   {"backend": "cpu", "arch": "x86_64", "image": False, "float16": False, "nolocals": False},
//!  "inputs":   [{"name", "shape": [..], "dtype": "uint8", "buffer": i}],
//!  "outputs":  [{"name", "shape", "dtype", "buffer": i, "slices": {name: (start, end)} | None}],
//!  "buffers":  [{"size", "dtype", "kind": "weight|input|output|state|scratch",
//!                "placement": "device|host", "blob": record | None, "checksum": "xxh3:<16 hex>" | None,
//!                "image": {"width", "height", "pitch", "channel": "float|half"} | None}],
//!  "programs": [{"name", "format": "elf|opencl|adreno|amdgpu|ir3", "blob": record, "args": n,
//!                "amdgpu": {..} (amdgpu programs only; see `super::amdgpu`)
//!                "ir3": {..} (ir3 programs only; see `super::ir3`)
//!                "params": [{"dtype", "writes": bool, "bytes": n | None, "image": (w, h) | None}],  # per argument
//!                "global": [x,y,z], "local": [x,y,z]}],                                       # the grid compiled for
//!  "step":     [{"op": "dispatch", "program": p, "args": [(buffer, offset)..], "global": [x,y,z], "local": [x,y,z]}
//!              | {"op": "copy", "src": (buffer, offset), "dst": (buffer, offset), "size": n}],
//!  "metadata": {"compiler": str, "model_hash": str, "props": {str: str},
//!               "pinned": [{"name", "shape", "dtype", "hash": "xxh3:<16 hex>"}]},   # absent: none

//!  "blobs":    [PickleBuffer, ...],   # record k of the container, in order
//!  "_pad":     [record, ...],         # records that only align the next one to 64 bytes
//!  "integrity": record}               # the last record: xxh3 of the pickle and of every other record
//! ```
//! `record` is an index into `blobs`, i.e. the n-th out-of-band record of the file. Decoding checks
//! types and bounds only; [`super::verify`] checks meaning.

use super::pickle::Value;
use crate::device::{BufferUse, ImageChannel, ImageDesc, ProgramFormat, StepOp};
use crate::dtype::DType;
use crate::target::{Arch, Backend};

/// The only payload version this build reads and writes (2: the integrity record).
pub const VERSION: i64 = 2;
/// The value of the payload's `format` key.
pub const FORMAT: &str = "pilot";

/// A schema violation at a path such as `buffers[3].size`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct SchemaError {
    pub path: String,
    pub reason: String,
}

pub(crate) fn err(path: impl Into<String>, reason: impl Into<String>) -> SchemaError {
    SchemaError { path: path.into(), reason: reason.into() }
}

pub use crate::target::Target;

/// A model input or output.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSpec {
    pub name: String,
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub buffer: usize,
    /// Output slices from the ONNX metadata (openpilot's `output_slices`): name → [start, end).
    pub slices: Vec<(String, usize, usize)>,
}

impl TensorSpec {
    pub fn elements(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn nbytes(&self) -> usize {
        self.elements() * self.dtype.size()
    }
}

/// Where a buffer lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    Device,
    /// Host memory the device maps (zero-copy inputs such as camera frames).
    Host,
}

#[derive(Clone, Debug, PartialEq)]
pub struct BufferSpec {
    pub size: usize,
    pub dtype: DType,
    pub kind: BufferUse,
    pub placement: Placement,
    /// The record holding the initial contents (required for weights, optional for state).
    pub blob: Option<usize>,
    /// xxh3-64 of the contents, checked by `pilot load --verify`.
    pub checksum: Option<u64>,
    /// Set when the buffer is a 2-D RGBA image; its contents (and `size`) are then the pitched rows.
    pub image: Option<ImageDesc>,
}

/// What a kernel's argument is, as the compiler generated the kernel for it. The verifier checks every
/// dispatch against it, so a step that passes cannot make a kernel reach outside its buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamSpec {
    /// The element type the kernel reads or writes through the argument.
    pub dtype: DType,
    /// Whether the kernel writes through the argument (never a weight or an input: weights may be
    /// read-only maps of the artifact, inputs host memory).
    pub writes: bool,
    pub kind: ParamKind,
}

/// How a kernel addresses an argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A plain buffer: the kernel reads or writes at most `bytes` bytes from the argument's offset.
    Buffer { bytes: u64 },
    /// A 2-D RGBA image of exactly these pixel dimensions (addressed by pixel, bound whole).
    Image { width: u32, height: u32 },
}

#[derive(Clone, Debug, PartialEq)]
pub struct ProgramEntry {
    pub name: String,
    pub format: ProgramFormat,
    pub blob: usize,
    pub args: usize,
    /// What a dispatch needs, read from the code object (`amdgpu` programs only).
    pub amdgpu: Option<super::amdgpu::AmdDispatch>,
    /// What a dispatch needs, as Mesa's ir3 reported it (`ir3` programs only).
    pub ir3: Option<super::ir3::Ir3Program>,
    /// One per argument, in order.
    pub params: Vec<ParamSpec>,
    /// The grid the kernel was generated for; every dispatch of it must use exactly this one.
    pub global: [u32; 3],
    pub local: [u32; 3],
}

/// A step operation with buffer and program indices of the artifact (not device handles).
pub type StepEntry = StepOp;

/// The whole typed payload.
#[derive(Clone, Debug, PartialEq)]
pub struct Manifest {
    pub target: Target,
    pub inputs: Vec<TensorSpec>,
    pub outputs: Vec<TensorSpec>,
    pub buffers: Vec<BufferSpec>,
    pub programs: Vec<ProgramEntry>,
    /// Dispatch/copy ops whose `BufferId`/`ProgramId` hold artifact indices.
    pub step: Vec<StepEntry>,
    pub metadata: Metadata,
    /// Number of out-of-band records (`blobs`).
    pub blob_count: usize,
    /// Records that only pad.
    pub pads: Vec<usize>,
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Metadata {
    pub compiler: String,
    pub model_hash: String,
    /// ONNX `metadata_props`, in order.
    pub props: Vec<(String, String)>,
    /// Model inputs pinned to a value at compile time (`pilot compile --const`): no longer inputs of
    /// the artifact; their values are folded into its code and weights.
    pub pinned: Vec<PinnedInput>,
}

/// A model input pinned to a value at compile time: its declared name, the value's shape and dtype,
/// and the xxh3 of the value's bytes (`"xxh3:<16 hex>"`), so the value used can be identified.
#[derive(Clone, Debug, PartialEq)]
pub struct PinnedInput {
    pub name: String,
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub hash: String,
}

pub(crate) fn kind_name(kind: BufferUse) -> &'static str {
    match kind {
        BufferUse::Weight => "weight",
        BufferUse::Input => "input",
        BufferUse::Output => "output",
        BufferUse::State => "state",
        BufferUse::Scratch => "scratch",
    }
}

fn kind_from(s: &str) -> Option<BufferUse> {
    Some(match s {
        "weight" => BufferUse::Weight,
        "input" => BufferUse::Input,
        "output" => BufferUse::Output,
        "state" => BufferUse::State,
        "scratch" => BufferUse::Scratch,
        _ => return None,
    })
}

pub(crate) fn format_name(f: ProgramFormat) -> &'static str {
    match f {
        ProgramFormat::Elf => "elf",
        ProgramFormat::OpenClSource => "opencl",
        ProgramFormat::AdrenoBlob => "adreno",
        ProgramFormat::AmdCodeObject => "amdgpu",
        ProgramFormat::A6xxIr3 => "ir3",
    }
}

fn format_from(s: &str) -> Option<ProgramFormat> {
    Some(match s {
        "elf" => ProgramFormat::Elf,
        "opencl" => ProgramFormat::OpenClSource,
        "adreno" => ProgramFormat::AdrenoBlob,
        "amdgpu" => ProgramFormat::AmdCodeObject,
        "ir3" => ProgramFormat::A6xxIr3,
        _ => return None,
    })
}

/// Refuses a key of the dict at `path` that is not one of `known`: a key the schema does not define (a renamed
/// key would otherwise drop its record silently, e.g. a buffer's `checksum` from `load --verify`).
pub(crate) fn check_keys(path: &str, entries: &[(Value, Value)], known: &[&str]) -> Result<(), SchemaError> {
    for (k, _) in entries {
        match k {
            Value::Str(s) if known.contains(&s.as_str()) => {}
            Value::Str(s) if path.is_empty() => return Err(err(s.as_str(), "unknown key")),
            Value::Str(s) => return Err(err(format!("{path}.{s}"), "unknown key")),
            other => return Err(err(path, format!("expected str keys, found {}", other.type_name()))),
        }
    }
    Ok(())
}

/// Typed access to a dict with paths for errors.
struct Obj<'a> {
    path: String,
    entries: &'a [(Value, Value)],
}

impl<'a> Obj<'a> {
    /// The dict at `path`, which may hold only the `known` keys ([`check_keys`]).
    fn new(path: &str, v: &'a Value, known: &[&str]) -> Result<Obj<'a>, SchemaError> {
        let Value::Dict(entries) = v else {
            return Err(err(path, format!("expected dict, found {}", v.type_name())));
        };
        check_keys(path, entries, known)?;
        Ok(Obj { path: path.to_string(), entries })
    }

    fn at(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    fn opt(&self, key: &str) -> Option<&'a Value> {
        self.entries.iter().find(|(k, _)| matches!(k, Value::Str(s) if s == key)).map(|(_, v)| v)
    }

    fn get(&self, key: &str) -> Result<&'a Value, SchemaError> {
        self.opt(key).ok_or_else(|| err(self.at(key), "missing"))
    }

    fn str(&self, key: &str) -> Result<&'a str, SchemaError> {
        as_str(&self.at(key), self.get(key)?)
    }

    fn uint(&self, key: &str) -> Result<usize, SchemaError> {
        as_uint(&self.at(key), self.get(key)?)
    }

    fn bool(&self, key: &str) -> Result<bool, SchemaError> {
        match self.get(key)? {
            Value::Bool(b) => Ok(*b),
            other => Err(err(self.at(key), format!("expected bool, found {}", other.type_name()))),
        }
    }

    fn opt_uint(&self, key: &str) -> Result<Option<usize>, SchemaError> {
        match self.opt(key) {
            None | Some(Value::None) => Ok(None),
            Some(v) => as_uint(&self.at(key), v).map(Some),
        }
    }

    fn list(&self, key: &str) -> Result<&'a [Value], SchemaError> {
        as_list(&self.at(key), self.get(key)?)
    }

    fn dtype(&self, key: &str) -> Result<DType, SchemaError> {
        let s = self.str(key)?;
        DType::from_name(s).ok_or_else(|| err(self.at(key), format!("unknown dtype `{s}`")))
    }
}

fn as_str<'a>(path: &str, v: &'a Value) -> Result<&'a str, SchemaError> {
    match v {
        Value::Str(s) => Ok(s),
        other => Err(err(path, format!("expected str, found {}", other.type_name()))),
    }
}

fn as_uint(path: &str, v: &Value) -> Result<usize, SchemaError> {
    match v {
        Value::Int(i) if *i >= 0 => {
            usize::try_from(*i).map_err(|_| err(path, format!("{i} does not fit this machine")))
        }
        Value::Int(i) => Err(err(path, format!("expected a non-negative int, found {i}"))),
        other => Err(err(path, format!("expected int, found {}", other.type_name()))),
    }
}

fn as_list<'a>(path: &str, v: &'a Value) -> Result<&'a [Value], SchemaError> {
    match v {
        Value::List(items) | Value::Tuple(items) => Ok(items),
        other => Err(err(path, format!("expected list, found {}", other.type_name()))),
    }
}

fn uints(path: &str, v: &Value) -> Result<Vec<usize>, SchemaError> {
    as_list(path, v)?.iter().enumerate().map(|(i, x)| as_uint(&format!("{path}[{i}]"), x)).collect()
}

fn dims3(path: &str, v: &Value) -> Result<[u32; 3], SchemaError> {
    let d = uints(path, v)?;
    if d.len() != 3 {
        return Err(err(path, format!("expected 3 dimensions, found {}", d.len())));
    }
    let mut out = [0u32; 3];
    for (i, x) in d.into_iter().enumerate() {
        out[i] = u32::try_from(x).map_err(|_| err(format!("{path}[{i}]"), "exceeds u32"))?;
    }
    Ok(out)
}

fn arg_ref(path: &str, v: &Value) -> Result<crate::device::Arg, SchemaError> {
    let pair = uints(path, v)?;
    let [buffer, offset] = pair[..] else {
        return Err(err(path, "expected (buffer, offset)"));
    };
    let buffer = u32::try_from(buffer).map_err(|_| err(path, "buffer index exceeds u32"))?;
    Ok(crate::device::Arg { buffer: crate::device::BufferId(buffer), offset: offset as u64 })
}

fn pinned_input(path: &str, v: &Value) -> Result<PinnedInput, SchemaError> {
    let o = Obj::new(path, v, &["name", "shape", "dtype", "hash"])?;
    Ok(PinnedInput {
        name: o.str("name")?.to_string(),
        shape: uints(&o.at("shape"), o.get("shape")?)?,
        dtype: o.dtype("dtype")?,
        hash: o.str("hash")?.to_string(),
    })
}

fn tensor(path: &str, v: &Value) -> Result<TensorSpec, SchemaError> {
    let o = Obj::new(path, v, &["name", "shape", "dtype", "buffer", "slices"])?;
    let shape = uints(&o.at("shape"), o.get("shape")?)?;
    let mut slices = Vec::new();
    if let Some(Value::Dict(entries)) = o.opt("slices") {
        for (k, range) in entries {
            let p = o.at("slices");
            let name = as_str(&p, k)?.to_string();
            let r = uints(&format!("{p}.{name}"), range)?;
            let [start, end] = r[..] else {
                return Err(err(format!("{p}.{name}"), "expected (start, end)"));
            };
            slices.push((name, start, end));
        }
    } else if let Some(other @ (Value::Bool(_) | Value::Int(_) | Value::Str(_) | Value::List(_))) = o.opt("slices") {
        return Err(err(o.at("slices"), format!("expected dict or None, found {}", other.type_name())));
    }
    Ok(TensorSpec {
        name: o.str("name")?.to_string(),
        shape,
        dtype: o.dtype("dtype")?,
        buffer: o.uint("buffer")?,
        slices,
    })
}

fn buffer(path: &str, v: &Value) -> Result<BufferSpec, SchemaError> {
    let o = Obj::new(path, v, &["size", "dtype", "kind", "placement", "blob", "checksum", "image"])?;
    let kind = o.str("kind")?;
    let placement = match o.str("placement")? {
        "device" => Placement::Device,
        "host" => Placement::Host,
        other => return Err(err(o.at("placement"), format!("unknown placement `{other}`"))),
    };
    let checksum = match o.opt("checksum") {
        None | Some(Value::None) => None,
        Some(v) => Some(parse_checksum(&o.at("checksum"), as_str(&o.at("checksum"), v)?)?),
    };
    Ok(BufferSpec {
        size: o.uint("size")?,
        dtype: o.dtype("dtype")?,
        kind: kind_from(kind).ok_or_else(|| err(o.at("kind"), format!("unknown kind `{kind}`")))?,
        placement,
        blob: o.opt_uint("blob")?,
        checksum,
        image: match o.opt("image") {
            None | Some(Value::None) => None,
            Some(v) => Some(image(&o.at("image"), v)?),
        },
    })
}

fn image(path: &str, v: &Value) -> Result<ImageDesc, SchemaError> {
    let o = Obj::new(path, v, &["width", "height", "pitch", "channel"])?;
    let dim = |key: &str| -> Result<u32, SchemaError> {
        let n = o.uint(key)?;
        u32::try_from(n).ok().filter(|&n| n > 0).ok_or_else(|| err(o.at(key), format!("{n} is out of range")))
    };
    let channel = match o.str("channel")? {
        "float" => ImageChannel::F32,
        "half" => ImageChannel::F16,
        other => return Err(err(o.at("channel"), format!("unknown channel type `{other}`"))),
    };
    Ok(ImageDesc { width: dim("width")?, height: dim("height")?, pitch: dim("pitch")?, channel })
}

/// The payload name of an image channel type.
pub fn channel_name(c: ImageChannel) -> &'static str {
    match c {
        ImageChannel::F32 => "float",
        ImageChannel::F16 => "half",
    }
}

fn parse_checksum(path: &str, s: &str) -> Result<u64, SchemaError> {
    s.strip_prefix("xxh3:")
        .filter(|h| h.len() == 16)
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .ok_or_else(|| err(path, format!("expected `xxh3:` and 16 hex digits, found `{s}`")))
}

fn param(path: &str, v: &Value) -> Result<ParamSpec, SchemaError> {
    let o = Obj::new(path, v, &["dtype", "writes", "bytes", "image"])?;
    let kind = match (o.opt_uint("bytes")?, o.opt("image")) {
        (Some(bytes), None | Some(Value::None)) => ParamKind::Buffer { bytes: bytes as u64 },
        (None, Some(image @ (Value::List(_) | Value::Tuple(_)))) => {
            let dims = uints(&o.at("image"), image)?;
            let [width, height] = dims[..] else {
                return Err(err(o.at("image"), "expected (width, height)"));
            };
            let dim = |n: usize| u32::try_from(n).map_err(|_| err(o.at("image"), format!("{n} exceeds u32")));
            ParamKind::Image { width: dim(width)?, height: dim(height)? }
        }
        _ => return Err(err(path, "expected exactly one of `bytes` and `image`")),
    };
    Ok(ParamSpec { dtype: o.dtype("dtype")?, writes: o.bool("writes")?, kind })
}

fn program(path: &str, v: &Value) -> Result<ProgramEntry, SchemaError> {
    let o = Obj::new(path, v, &["name", "format", "blob", "args", "amdgpu", "ir3", "params", "global", "local"])?;
    let format = o.str("format")?;
    Ok(ProgramEntry {
        name: o.str("name")?.to_string(),
        format: format_from(format).ok_or_else(|| err(o.at("format"), format!("unknown format `{format}`")))?,
        blob: o.uint("blob")?,
        args: o.uint("args")?,
        amdgpu: match o.opt("amdgpu") {
            None | Some(Value::None) => None,
            Some(v) => Some(super::amdgpu::AmdDispatch::decode(&o.at("amdgpu"), v)?),
        },
        ir3: match o.opt("ir3") {
            None | Some(Value::None) => None,
            Some(v) => Some(super::ir3::Ir3Program::decode(&o.at("ir3"), v)?),
        },
        params: list_of(&o, "params", param)?,
        global: dims3(&o.at("global"), o.get("global")?)?,
        local: dims3(&o.at("local"), o.get("local")?)?,
    })
}

fn step_op(path: &str, v: &Value) -> Result<StepOp, SchemaError> {
    const DISPATCH: &[&str] = &["op", "program", "args", "global", "local"];
    const COPY: &[&str] = &["op", "src", "dst", "size"];
    let op = Obj::new(path, v, &["op", "program", "args", "global", "local", "src", "dst", "size"])?.str("op")?;
    match op {
        "dispatch" => {
            let o = Obj::new(path, v, DISPATCH)?;
            let program = u32::try_from(o.uint("program")?).map_err(|_| err(o.at("program"), "exceeds u32"))?;
            let args = o
                .list("args")?
                .iter()
                .enumerate()
                .map(|(i, a)| arg_ref(&format!("{}[{i}]", o.at("args")), a))
                .collect::<Result<_, _>>()?;
            Ok(StepOp::Dispatch {
                program: crate::device::ProgramId(program),
                args,
                global: dims3(&o.at("global"), o.get("global")?)?,
                local: dims3(&o.at("local"), o.get("local")?)?,
            })
        }
        "copy" => {
            let o = Obj::new(path, v, COPY)?;
            Ok(StepOp::Copy {
                src: arg_ref(&o.at("src"), o.get("src")?)?,
                dst: arg_ref(&o.at("dst"), o.get("dst")?)?,
                len: o.uint("size")? as u64,
            })
        }
        other => Err(err(format!("{path}.op"), format!("unknown step op `{other}`"))),
    }
}

fn list_of<T>(
    o: &Obj<'_>,
    key: &str,
    f: impl Fn(&str, &Value) -> Result<T, SchemaError>,
) -> Result<Vec<T>, SchemaError> {
    o.list(key)?.iter().enumerate().map(|(i, v)| f(&format!("{}[{i}]", o.at(key)), v)).collect()
}

impl Manifest {
    /// Pass one: decodes the payload, checking every type and bound. `buffer_count` is the number of
    /// NEXT_BUFFER opcodes the pickle held.
    pub fn decode(payload: &Value, buffer_count: usize) -> Result<Manifest, SchemaError> {
        let o = Obj::new(
            "",
            payload,
            &[
                "format",
                "version",
                "target",
                "inputs",
                "outputs",
                "buffers",
                "programs",
                "step",
                "metadata",
                "blobs",
                "_pad",
                "integrity",
            ],
        )?;
        match o.get("format") {
            Ok(Value::Str(s)) if s == FORMAT => {}
            _ => return Err(err("format", "not a pilot artifact (expected format \"pilot\")")),
        }
        match o.get("version")? {
            Value::Int(VERSION) => {}
            Value::Int(v) => {
                return Err(err("version", format!("version {v} is not supported (this build reads {VERSION})")))
            }
            other => return Err(err("version", format!("expected int, found {}", other.type_name()))),
        }
        let t = Obj::new("target", o.get("target")?, &["backend", "arch", "image", "float16", "nolocals"])?;
        let (backend, arch) = (t.str("backend")?, t.str("arch")?);
        let target = Target {
            backend: Backend::from_name(backend).ok_or_else(|| {
                let known = Backend::ALL.map(Backend::name).join(", ");
                err("target.backend", format!("unknown backend `{backend}` (known: {known})"))
            })?,
            arch: Arch::from_name(arch).ok_or_else(|| {
                let known = Arch::ALL.map(Arch::name).join(", ");
                err("target.arch", format!("unknown arch `{arch}` (known: {known})"))
            })?,
            image: t.bool("image")?,
            float16: t.bool("float16")?,
            nolocals: t.bool("nolocals")?,
        };
        let blobs = o.list("blobs")?;
        for (i, b) in blobs.iter().enumerate() {
            if *b != Value::Buffer(i as u32) {
                return Err(err(format!("blobs[{i}]"), format!("expected out-of-band buffer {i}")));
            }
        }
        if blobs.len() != buffer_count {
            return Err(err(
                "blobs",
                format!("lists {} records but the pickle references {buffer_count}", blobs.len()),
            ));
        }
        let integrity = o.uint("integrity")?;
        if integrity + 1 != blobs.len() {
            return Err(err("integrity", format!("record {integrity} is not the last of the {} records", blobs.len())));
        }
        let m = Obj::new("metadata", o.get("metadata")?, &["compiler", "model_hash", "props", "pinned"])?;
        let props = match m.get("props")? {
            Value::Dict(entries) => entries
                .iter()
                .map(|(k, v)| {
                    let p = m.at("props");
                    Ok((as_str(&p, k)?.to_string(), as_str(&p, v)?.to_string()))
                })
                .collect::<Result<_, SchemaError>>()?,
            other => return Err(err(m.at("props"), format!("expected dict, found {}", other.type_name()))),
        };
        let pinned = match m.opt("pinned") {
            None => Vec::new(),
            Some(v) => as_list(&m.at("pinned"), v)?
                .iter()
                .enumerate()
                .map(|(i, v)| pinned_input(&format!("{}[{i}]", m.at("pinned")), v))
                .collect::<Result<_, SchemaError>>()?,
        };
        Ok(Manifest {
            target,
            inputs: list_of(&o, "inputs", tensor)?,
            outputs: list_of(&o, "outputs", tensor)?,
            buffers: list_of(&o, "buffers", buffer)?,
            programs: list_of(&o, "programs", program)?,
            step: list_of(&o, "step", step_op)?,
            metadata: Metadata {
                compiler: m.str("compiler")?.to_string(),
                model_hash: m.str("model_hash")?.to_string(),
                props,
                pinned,
            },
            blob_count: blobs.len(),
            pads: list_of(&o, "_pad", as_uint)?,
        })
    }
}
