//! [`ClExecutor`]: runs the dispatches the fake KGSL decodes on an OpenCL device, so a program compiled with
//! `--qcom-compiler fake` computes real results through the backend's whole command-stream path.
//!
//! For each [`Dispatch`] it reads the shader image at SP_CS_BASE, which for such programs is a [`FakeShader`]
//! (the kernel's name, OpenCL C source and argument layout) and rebuilds the kernel's arguments from what the
//! command processor saw: a buffer argument's u64 GPU address from the constant file at byte `offset_words * 4`
//! (as tinygrad's `runtime/ops_qcom.py` lays it out), an image argument from its texture or IBO descriptor (Mesa's
//! `a6xx.xml` `A6XX_TEX_CONST`/`A6XX_IBO`) in the tables that
//! CP_LOAD_STATE6 loaded, as the fake decoded them. The sampler the kernel declares (`sampler_t smp = ...;`) is
//! replaced by the dispatch's sampler 0 as the fake decoded it (normalized or not, filter, wrap), so a wrong
//! sampler descriptor gives wrong numbers or an error, never the right answer by accident. The bytes are copied
//! from GPU memory into OpenCL buffers and images, the kernel runs with `groups × local` work-items in groups of
//! `local`, and every written buffer and every IBO image is copied back to GPU memory at the same address.
//!
//! Buffer arguments that point at the same GPU address share one OpenCL buffer (as large as the largest of them),
//! so in-place kernels see their own writes. OpenCL objects are made once per distinct launch shape (kernel,
//! argument sizes and image formats, NDRange) and reused by later dispatches of the same shape; programs are
//! built once per (kernel, source).

use crate::fake::descriptors::{Filter, Sampler, TexelFormat, Wrap};
use crate::fake::{Dispatch, Executor, FakeKgsl, GpuMemory};
use crate::fake_shader::{FakeShader, ShaderArg, FAKE_MAGIC};
use pilot_cl::ClDevice;
use pilot_core::device::{
    Arg, BufferId, BufferUse, Device, ImageChannel, ImageDesc, ProgramFormat, ProgramId, ProgramSpec, StepId, StepOp,
};
use std::collections::HashMap;

/// Bytes of a fake shader's header: the magic and the kernel name's length.
const HEADER_BYTES: usize = FAKE_MAGIC.len() + 4;

/// Longest kernel name or source the executor reads (a corrupt length would otherwise ask for gigabytes).
const MAX_SHADER_BYTES: u64 = 64 << 20;

/// What one kernel argument becomes on the OpenCL device; part of the launch shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Slot {
    /// A buffer of `bytes` bytes, shared with argument `first` (the earliest at the same GPU address; itself if
    /// none came before).
    Buffer {
        bytes: u64,
        first: usize,
    },
    Image(ImageDesc),
}

/// One argument reconstructed from the dispatch.
#[derive(Clone, Copy, Debug)]
struct Bound {
    slot: Slot,
    /// GPU address of its bytes.
    va: u64,
    /// Copied back after the kernel: a written buffer (or one sharing a written buffer's memory) or an IBO.
    download: bool,
}

impl Bound {
    fn span(&self) -> u64 {
        match self.slot {
            Slot::Buffer { bytes, .. } => bytes,
            Slot::Image(desc) => desc.bytes() as u64,
        }
    }

    /// Whether this argument owns its device memory (not an alias of an earlier buffer argument).
    fn owns(&self, index: usize) -> bool {
        !matches!(self.slot, Slot::Buffer { first, .. } if first != index)
    }
}

/// A launch shape: the program, its arguments' device memory, and the NDRange in work-items.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ShapeKey {
    program: ProgramId,
    slots: Vec<Slot>,
    global: [u32; 3],
    local: [u32; 3],
}

/// The device objects of one launch shape: a linked step and the memory of each argument.
struct Linked {
    step: StepId,
    buffers: Vec<BufferId>,
}

/// An [`Executor`] that runs fake-compiled kernels on OpenCL. See the module docs.
pub struct ClExecutor {
    dev: ClDevice,
    /// By (kernel name, source).
    programs: HashMap<(String, String), ProgramId>,
    shapes: HashMap<ShapeKey, Linked>,
}

impl std::fmt::Debug for ClExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClExecutor")
            .field("device", &self.dev.device_name())
            .field("programs", &self.programs.len())
            .field("shapes", &self.shapes.len())
            .finish_non_exhaustive()
    }
}

/// A fake KGSL whose dispatches run on the default OpenCL device (`PILOT_CL_DEVICE`, else the first GPU, else
/// the first device); fails when this machine has no OpenCL.
pub fn fake_with_opencl() -> Result<FakeKgsl, String> {
    Ok(FakeKgsl::new().with_executor(Box::new(ClExecutor::open(None)?)))
}

impl ClExecutor {
    /// Runs dispatches on `dev`.
    pub fn new(dev: ClDevice) -> Self {
        ClExecutor { dev, programs: HashMap::new(), shapes: HashMap::new() }
    }

    /// Opens the OpenCL device `selector` (`"P:D"`; `None`: as [`ClDevice::open`] chooses).
    pub fn open(selector: Option<&str>) -> Result<Self, String> {
        ClDevice::open(selector).map(Self::new).map_err(|e| e.to_string())
    }

    /// The OpenCL device.
    pub fn device(&self) -> &ClDevice {
        &self.dev
    }

    /// How many distinct launch shapes have device objects.
    pub fn shapes(&self) -> usize {
        self.shapes.len()
    }

    fn program(&mut self, shader: &FakeShader, source: String) -> Result<ProgramId, String> {
        let key = (shader.name.clone(), source);
        if let Some(&id) = self.programs.get(&key) {
            return Ok(id);
        }
        let spec = ProgramSpec {
            name: &shader.name,
            format: ProgramFormat::OpenClSource,
            code: key.1.as_bytes(),
            arg_count: shader.args.len(),
            amdgpu: None,
            ir3: None,
        };
        let id = self.dev.load_program(&spec).map_err(|e| e.to_string())?;
        self.programs.insert(key, id);
        Ok(id)
    }

    /// The device objects for `key`, made on first sight.
    fn linked(&mut self, key: ShapeKey) -> Result<&Linked, String> {
        if !self.shapes.contains_key(&key) {
            let mut buffers: Vec<BufferId> = Vec::with_capacity(key.slots.len());
            for slot in &key.slots {
                let id = match *slot {
                    Slot::Buffer { first, .. } if first < buffers.len() => buffers[first],
                    Slot::Buffer { bytes, .. } => {
                        let size = usize::try_from(bytes).map_err(|_| format!("buffer of {bytes} bytes"))?;
                        self.dev.alloc(size, BufferUse::State).map_err(|e| e.to_string())?
                    }
                    Slot::Image(desc) => self.dev.alloc_image(desc, BufferUse::State).map_err(|e| e.to_string())?,
                };
                buffers.push(id);
            }
            let args = buffers.iter().map(|&buffer| Arg { buffer, offset: 0 }).collect();
            let op = StepOp::Dispatch { program: key.program, args, global: key.global, local: key.local };
            let step = self.dev.link_step(&[op]).map_err(|e| e.to_string())?;
            self.shapes.insert(key.clone(), Linked { step, buffers });
        }
        Ok(&self.shapes[&key])
    }
}

/// Reads and decodes the fake shader at the dispatch's shader address: the header first, then the whole image.
fn read_shader(d: &Dispatch, mem: &dyn GpuMemory) -> Result<FakeShader, String> {
    let image_bytes = d.instr_units as u64 * 128;
    let not_fake = |why: &str| {
        format!(
            "shader at {:#x} is not a fake shader ({why}): this executor only runs programs compiled with \
             `--qcom-compiler fake`",
            d.shader_addr
        )
    };
    if image_bytes < HEADER_BYTES as u64 {
        return Err(not_fake(&format!("{image_bytes} bytes")));
    }
    let mut header = [0u8; HEADER_BYTES];
    mem.read(d.shader_addr, &mut header).map_err(|e| format!("shader header: {e}"))?;
    if header[..FAKE_MAGIC.len()] != FAKE_MAGIC[..] {
        return Err(not_fake(&format!("it starts {:02x?}", &header[..FAKE_MAGIC.len()])));
    }
    if image_bytes > MAX_SHADER_BYTES {
        return Err(format!("fake shader at {:#x}: image of {image_bytes} bytes is too large", d.shader_addr));
    }
    let mut image = vec![0u8; image_bytes as usize];
    mem.read(d.shader_addr, &mut image).map_err(|e| format!("fake shader at {:#x}: {e}", d.shader_addr))?;
    FakeShader::decode(&image).ok_or_else(|| {
        format!("fake shader at {:#x}: malformed image ({image_bytes} bytes, SP_CS_INSTR_SIZE)", d.shader_addr)
    })
}

/// Which descriptor table an image argument reads.
#[derive(Clone, Copy)]
enum Table {
    Texture,
    Ibo,
}

/// The image bound at descriptor `index` of `table`, as an OpenCL image description, and its GPU address.
fn image_arg(d: &Dispatch, mem: &dyn GpuMemory, table: Table, index: u32) -> Result<(ImageDesc, u64), String> {
    let (name, base, views) = match table {
        Table::Texture => ("texture", d.texture_table, &d.texture_views),
        Table::Ibo => ("IBO", d.ibo_table, &d.ibo_views),
    };
    let Some(image) = views.get(index as usize) else {
        return Err(format!("{name} {index} is not bound (SP_CS_CONFIG declares {} {name}s)", views.len()));
    };
    let at = base + 64 * index as u64;
    let fail = |what: String| format!("{name} {index} descriptor at {at:#x}: {what}");
    let va = image.base;
    if mem.check(va, 1).is_err() {
        return Err(fail(format!("base {va:#x} outside any allocation")));
    }
    if mem.check(va, image.span()).is_err() {
        return Err(fail(format!("image {va:#x}+{:#x} runs past its allocation", image.span())));
    }
    let channel = match image.format {
        TexelFormat::Rgba32Float => ImageChannel::F32,
        TexelFormat::Rgba16Float => ImageChannel::F16,
    };
    Ok((ImageDesc { width: image.width, height: image.height, pitch: image.pitch, channel }, va))
}

/// Rebuilds every argument of `shader` from the dispatch, in signature order.
fn bind(d: &Dispatch, mem: &dyn GpuMemory, shader: &FakeShader) -> Result<Vec<Bound>, String> {
    let const_bytes = d.const_units as u64 * 16;
    let mut out: Vec<Bound> = Vec::with_capacity(shader.args.len());
    for (i, arg) in shader.args.iter().enumerate() {
        let bound = match *arg {
            ShaderArg::Buffer { offset_words, bytes, written } => {
                let at = offset_words as u64 * 4;
                if at + 8 > const_bytes {
                    return Err(format!(
                        "argument {i}: constant-file byte {at} is outside the {const_bytes} bytes CP_LOAD_STATE6 loaded"
                    ));
                }
                let mut ptr = [0u8; 8];
                mem.read(d.consts + at, &mut ptr).map_err(|e| format!("argument {i}: constant file: {e}"))?;
                let va = u64::from_le_bytes(ptr);
                let bytes = bytes as u64;
                if mem.check(va, bytes.max(1)).is_err() {
                    return Err(format!(
                        "argument {i}: buffer {va:#x}+{bytes:#x} (pointer at constant-file byte {at}) is outside any \
                         GPU allocation"
                    ));
                }
                // An earlier buffer at the same address: share its memory, grown to cover both.
                let first = out.iter().position(|b| matches!(b.slot, Slot::Buffer { .. }) && b.va == va).unwrap_or(i);
                if first != i {
                    let lead = &mut out[first];
                    if let Slot::Buffer { bytes: b, .. } = &mut lead.slot {
                        *b = (*b).max(bytes);
                    }
                    lead.download |= written;
                }
                Bound { slot: Slot::Buffer { bytes, first }, va, download: written }
            }
            ShaderArg::Texture { index } => {
                let (desc, va) = image_arg(d, mem, Table::Texture, index).map_err(|e| format!("argument {i}: {e}"))?;
                Bound { slot: Slot::Image(desc), va, download: false }
            }
            ShaderArg::Ibo { index } => {
                let (desc, va) = image_arg(d, mem, Table::Ibo, index).map_err(|e| format!("argument {i}: {e}"))?;
                Bound { slot: Slot::Image(desc), va, download: true }
            }
        };
        out.push(bound);
    }
    // Aliases take their group's size, so the shape key names one buffer size per group.
    for i in 0..out.len() {
        if let Slot::Buffer { first, .. } = out[i].slot {
            if first != i {
                let (size, written) = (out[first].span(), out[first].download);
                out[i].slot = Slot::Buffer { bytes: size, first };
                out[i].download = written;
            }
        }
    }
    Ok(out)
}

/// The OpenCL flags of a sampler, or why OpenCL cannot express it.
fn sampler_flags(s: &Sampler) -> Result<String, String> {
    let [ws, wt, _] = s.wrap;
    if ws != wt {
        return Err(format!("sampler 0 wraps S as {ws:?} and T as {wt:?}; OpenCL has one addressing mode"));
    }
    let address = match ws {
        Wrap::ClampToBorder => "CLK_ADDRESS_CLAMP",
        Wrap::ClampToEdge => "CLK_ADDRESS_CLAMP_TO_EDGE",
        Wrap::Repeat if s.normalized => "CLK_ADDRESS_REPEAT",
        Wrap::MirrorRepeat if s.normalized => "CLK_ADDRESS_MIRRORED_REPEAT",
        w => return Err(format!("sampler 0 wraps as {w:?} with unnormalized coordinates, which OpenCL forbids")),
    };
    let coords = if s.normalized { "CLK_NORMALIZED_COORDS_TRUE" } else { "CLK_NORMALIZED_COORDS_FALSE" };
    let filter = match s.filter {
        Filter::Nearest => "CLK_FILTER_NEAREST",
        Filter::Linear => "CLK_FILTER_LINEAR",
    };
    Ok(format!("{coords} | {address} | {filter}"))
}

/// Whether some `read_image*` call passes integer coordinates (`(int2)...` as its third argument).
fn reads_at_integer_coordinates(source: &str) -> bool {
    source.match_indices("read_image").any(|(at, _)| {
        let Some(open) = source[at..].find('(') else { return false };
        let (mut depth, mut arg, mut start) = (0, 0, at + open + 1);
        for (i, c) in source[at + open..].char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 1 => {
                    return arg == 2 && source[start..at + open + i].trim_start().starts_with("(int2)")
                }
                ')' => depth -= 1,
                ',' if depth == 1 => {
                    if arg == 2 {
                        return source[start..at + open + i].trim_start().starts_with("(int2)");
                    }
                    arg += 1;
                    start = at + open + i + 1;
                }
                _ => {}
            }
        }
        false
    })
}

/// The shader's source with every `sampler_t NAME = ...;` declaration set from the dispatch's decoded sampler 0.
/// A kernel that reads textures needs a bound sampler, and integer coordinates need unnormalized nearest sampling
/// (OpenCL 1.2 §6.12.14.2); anything else is an error.
fn source_with_sampler(shader: &FakeShader, d: &Dispatch) -> Result<String, String> {
    let reads_textures = shader.args.iter().any(|a| matches!(a, ShaderArg::Texture { .. }));
    if !reads_textures {
        return Ok(shader.source.clone());
    }
    let Some(sampler) = d.sampler_states.first() else {
        return Err("the kernel samples textures but the dispatch binds no sampler (SP_CS_CONFIG NSAMP is 0)".into());
    };
    if reads_at_integer_coordinates(&shader.source) && (sampler.normalized || sampler.filter != Filter::Nearest) {
        return Err(format!(
            "the kernel reads images at integer coordinates, which OpenCL defines only with unnormalized coordinates \
             and nearest filtering; the dispatch's sampler 0 is {sampler:?}"
        ));
    }
    let flags = sampler_flags(sampler)?;
    let mut out = String::with_capacity(shader.source.len());
    let mut rest = shader.source.as_str();
    while let Some(at) = rest.find("sampler_t ") {
        let decl = &rest[at..];
        let (Some(eq), Some(end)) = (decl.find('='), decl.find(';')) else { break };
        if eq > end {
            break;
        }
        out.push_str(&rest[..at]);
        out.push_str(&decl[..=eq]);
        out.push(' ');
        out.push_str(&flags);
        rest = &decl[end..];
    }
    out.push_str(rest);
    Ok(out)
}

impl ClExecutor {
    fn run(&mut self, d: &Dispatch, mem: &mut dyn GpuMemory, shader: &FakeShader) -> Result<(), String> {
        let args = bind(d, mem, shader)?;
        let mut global = [0u32; 3];
        for (i, g) in global.iter_mut().enumerate() {
            *g = d.groups[i].checked_mul(d.local[i]).ok_or_else(|| {
                format!("{} work-groups of {} work-items overflow the NDRange", d.groups[i], d.local[i])
            })?;
        }
        let program = self.program(shader, source_with_sampler(shader, d)?)?;
        let key = ShapeKey { program, slots: args.iter().map(|b| b.slot).collect(), global, local: d.local };
        let linked = self.linked(key)?;
        let (step, buffers) = (linked.step, linked.buffers.clone());

        // Upload every owned argument (IBOs too: pixels the kernel does not write keep their contents).
        let mut host: Vec<Vec<u8>> = Vec::with_capacity(args.len());
        for (i, b) in args.iter().enumerate() {
            if !b.owns(i) {
                host.push(Vec::new());
                continue;
            }
            let mut bytes = vec![0u8; b.span() as usize];
            mem.read(b.va, &mut bytes).map_err(|e| format!("argument {i}: {e}"))?;
            self.dev.copy_in(buffers[i], 0, &bytes).map_err(|e| format!("argument {i}: {e}"))?;
            host.push(bytes);
        }
        let done = self.dev.submit(step).map_err(|e| e.to_string())?;
        self.dev.wait(done).map_err(|e| e.to_string())?;
        // Copy back, over the uploaded bytes: a pitched image's row padding keeps the GPU memory's contents.
        for (i, b) in args.iter().enumerate() {
            if !b.owns(i) || !b.download {
                continue;
            }
            let bytes = &mut host[i];
            self.dev.copy_out(buffers[i], 0, bytes).map_err(|e| format!("argument {i}: {e}"))?;
            mem.write(b.va, bytes).map_err(|e| format!("argument {i}: {e}"))?;
        }
        Ok(())
    }
}

impl Executor for ClExecutor {
    fn dispatch(&mut self, d: &Dispatch, mem: &mut dyn GpuMemory) -> Result<(), String> {
        let shader = read_shader(d, mem)?;
        self.run(d, mem, &shader).map_err(|e| format!("{}: {e}", shader.name))
    }
}
