//! Building and writing artifacts: [`ArtifactWriter`] collects out-of-band blobs, encodes the
//! [`Manifest`] as the plain-data payload, and streams everything to disk atomically.

use std::path::Path;

use super::container::{self, BlobSource, Record};
use super::pickle::{self, Value};
use super::schema::{format_name, kind_name, Manifest, ParamKind, ParamSpec, Placement, TensorSpec, FORMAT, VERSION};
use super::verify::verify;
use super::ArtifactError;
use crate::device::{Arg, StepOp};

/// xxh3-64 of a buffer's contents, the checksum `pilot load --verify` checks.
pub fn checksum(bytes: &[u8]) -> u64 {
    super::integrity::hash(bytes)
}

/// Collects blobs for one artifact. Each data blob is preceded by a padding record so that its bytes
/// start 64-byte aligned in the file (and so in the memory map); the integrity record comes last.
#[derive(Default)]
pub struct ArtifactWriter<'a> {
    blobs: Vec<&'a dyn BlobSource>,
}

impl<'a> ArtifactWriter<'a> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a blob and returns the record index to store in the manifest (`blob` fields).
    pub fn add_blob(&mut self, blob: &'a dyn BlobSource) -> usize {
        self.blobs.push(blob);
        2 * self.blobs.len() - 1
    }

    /// Fills `blob_count` and `pads` of `manifest` for the registered blobs, verifies it, and writes
    /// the artifact to `path` atomically (temp file + rename). Peak memory: the payload plus one
    /// blob's write buffer.
    pub fn write(&self, path: &Path, manifest: &mut Manifest) -> Result<(), ArtifactError> {
        manifest.blob_count = 2 * self.blobs.len() + 1;
        manifest.pads = (0..self.blobs.len()).map(|i| 2 * i).collect();
        let mut sizes: Vec<u64> = self.blobs.iter().flat_map(|b| [0, b.len()]).collect();
        sizes.push(integrity_len(sizes.len()));
        verify(manifest, &sizes)?;
        let payload = pickle::write(&encode(manifest)).map_err(|e| ArtifactError::Encode(e.to_string()))?;
        let mut records: Vec<Record<'_>> = self.blobs.iter().flat_map(|&b| [Record::Pad, Record::Data(b)]).collect();
        records.push(Record::Integrity);
        container::write(path, &payload, &records)
            .map_err(|e| ArtifactError::Io { path: path.display().to_string(), source: e })
    }
}

/// The size of the (unsigned) integrity record that covers `records` records.
pub(crate) fn integrity_len(records: usize) -> u64 {
    super::integrity::table_len(records) as u64
}

fn s(x: &str) -> Value {
    Value::str(x)
}

fn int(x: usize) -> Value {
    Value::Int(x as i64)
}

fn dict(entries: Vec<(&str, Value)>) -> Value {
    Value::Dict(entries.into_iter().map(|(k, v)| (s(k), v)).collect())
}

fn ints(xs: impl IntoIterator<Item = usize>) -> Value {
    Value::List(xs.into_iter().map(int).collect())
}

fn arg(a: &Arg) -> Value {
    Value::Tuple(vec![int(a.buffer.0 as usize), int(a.offset as usize)])
}

fn tensor(t: &TensorSpec, with_slices: bool) -> Value {
    let mut e = vec![
        ("name", s(&t.name)),
        ("shape", ints(t.shape.iter().copied())),
        ("dtype", s(t.dtype.name())),
        ("buffer", int(t.buffer)),
    ];
    if with_slices {
        let slices = if t.slices.is_empty() {
            Value::None
        } else {
            Value::Dict(t.slices.iter().map(|(n, a, b)| (s(n), Value::Tuple(vec![int(*a), int(*b)]))).collect())
        };
        e.push(("slices", slices));
    }
    dict(e)
}

/// Encodes a manifest as the version-2 payload (the integrity record is the last of `blob_count`).
pub fn encode(m: &Manifest) -> Value {
    let opt = |x: Option<usize>| x.map_or(Value::None, int);
    let buffers = m.buffers.iter().map(|b| {
        dict(vec![
            ("size", int(b.size)),
            ("dtype", s(b.dtype.name())),
            ("kind", s(kind_name(b.kind))),
            (
                "placement",
                s(match b.placement {
                    Placement::Device => "device",
                    Placement::Host => "host",
                }),
            ),
            ("blob", opt(b.blob)),
            ("checksum", b.checksum.map_or(Value::None, |c| s(&format!("xxh3:{c:016x}")))),
            (
                "image",
                b.image.map_or(Value::None, |im| {
                    dict(vec![
                        ("width", int(im.width as usize)),
                        ("height", int(im.height as usize)),
                        ("pitch", int(im.pitch as usize)),
                        ("channel", s(super::schema::channel_name(im.channel))),
                    ])
                }),
            ),
        ])
    });
    let dims = |d: &[u32; 3]| ints(d.iter().map(|&x| x as usize));
    let param = |p: &ParamSpec| {
        let (bytes, image) = match p.kind {
            ParamKind::Buffer { bytes } => (int(bytes as usize), Value::None),
            ParamKind::Image { width, height } => {
                (Value::None, Value::Tuple(vec![int(width as usize), int(height as usize)]))
            }
        };
        dict(vec![("dtype", s(p.dtype.name())), ("writes", Value::Bool(p.writes)), ("bytes", bytes), ("image", image)])
    };
    let programs = m.programs.iter().map(|p| {
        let ir3 = p.ir3.as_ref().map(|r| ("ir3", r.encode()));
        dict(
            vec![
                ("name", s(&p.name)),
                ("format", s(format_name(p.format))),
                ("blob", int(p.blob)),
                ("args", int(p.args)),
                ("amdgpu", p.amdgpu.as_ref().map_or(Value::None, |d| d.encode())),
                ("params", Value::List(p.params.iter().map(param).collect())),
                ("global", dims(&p.global)),
                ("local", dims(&p.local)),
            ]
            .into_iter()
            .chain(ir3)
            .collect(),
        )
    });
    let step = m.step.iter().map(|op| match op {
        StepOp::Dispatch { program, args, global, local } => dict(vec![
            ("op", s("dispatch")),
            ("program", int(program.0 as usize)),
            ("args", Value::List(args.iter().map(arg).collect())),
            ("global", ints(global.iter().map(|&x| x as usize))),
            ("local", ints(local.iter().map(|&x| x as usize))),
        ]),
        StepOp::Copy { src, dst, len } => {
            dict(vec![("op", s("copy")), ("src", arg(src)), ("dst", arg(dst)), ("size", int(*len as usize))])
        }
    });
    let t = &m.target;
    dict(vec![
        ("format", s(FORMAT)),
        ("version", Value::Int(VERSION)),
        (
            "target",
            dict(vec![
                ("backend", s(t.backend.name())),
                ("arch", s(t.arch.name())),
                ("image", Value::Bool(t.image)),
                ("float16", Value::Bool(t.float16)),
                ("nolocals", Value::Bool(t.nolocals)),
            ]),
        ),
        ("inputs", Value::List(m.inputs.iter().map(|x| tensor(x, false)).collect())),
        ("outputs", Value::List(m.outputs.iter().map(|x| tensor(x, true)).collect())),
        ("buffers", Value::List(buffers.collect())),
        ("programs", Value::List(programs.collect())),
        ("step", Value::List(step.collect())),
        ("metadata", dict(metadata(&m.metadata))),
        ("blobs", Value::List((0..m.blob_count as u32).map(Value::Buffer).collect())),
        ("_pad", ints(m.pads.iter().copied())),
        ("integrity", int(m.blob_count.saturating_sub(1))),
    ])
}

/// The `metadata` entries; `pinned` only when some input was pinned, so artifacts without pinned
/// inputs keep their earlier bytes.
fn metadata(m: &super::Metadata) -> Vec<(&'static str, Value)> {
    let mut entries = vec![
        ("compiler", s(&m.compiler)),
        ("model_hash", s(&m.model_hash)),
        ("props", Value::Dict(m.props.iter().map(|(k, v)| (s(k), s(v))).collect())),
    ];
    if !m.pinned.is_empty() {
        let pinned = m.pinned.iter().map(|p| {
            dict(vec![
                ("name", s(&p.name)),
                ("shape", ints(p.shape.iter().copied())),
                ("dtype", s(p.dtype.name())),
                ("hash", s(&p.hash)),
            ])
        });
        entries.push(("pinned", Value::List(pinned.collect())));
    }
    entries
}
