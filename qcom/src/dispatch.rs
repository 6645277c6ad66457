//! Encoders for the a630 compute command sequence and the kernel-argument block (tinygrad's `QCOMComputeQueue` and
//! `QCOMArgsState` in `tinygrad/runtime/ops_qcom.py`; descriptor fields from Mesa's `A6XX_TEX_CONST_*` in
//! `src/freedreno/registers/adreno/a6xx.xml`), on top of [`RelocBuf`] so that a whole step is encoded once with
//! symbolic addresses and linked later.
//!
//! The sequences reproduce tinygrad's `QCOMComputeQueue` dword for dword. Register values are packed by field name
//! with [`crate::a6xx`]; the few that tinygrad writes raw (without Mesa's field shifts, or copied from Qualcomm's
//! driver) are marked as such.

use crate::a6xx::{self, ConstRamMode, IsamMode, ThreadSize};
use crate::pm4::{self, event, load_state, reg, wait_reg_mem, Opcode};
use crate::reloc::{Addr, RelocBuf, Word};
use pilot_core::hcq::signal::SIGNAL_TIMESTAMP;

/// An encoding failure: a value that does not fit its hardware field, or an inconsistent launch.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("dispatch: {0}")]
pub struct DispatchError(pub String);

fn fail<T>(msg: impl Into<String>) -> Result<T, DispatchError> {
    Err(DispatchError(msg.into()))
}

const fn round_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to) * to
}

/// A register id meaning "unused" (ir3's `regid(63, 0)`).
const REGID_UNUSED: u32 = 0xfc;

/// Which compiler produced the shader; it selects the ISA mode registers and the launch packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShaderKind {
    /// Qualcomm's OpenCL compiler: launched with CP_RUN_OPENCL, grid from the registers.
    QcomCl,
    /// Mesa ir3: launched with CP_EXEC_CS. `wgid`/`lid` are register ids, `wgsz` the constant id of the local size
    /// (0xfc when unused).
    Ir3 { wgid: u8, wgsz: u8, lid: u8 },
}

impl ShaderKind {
    /// SP_MODE_CNTL: ISAMMODE CL (0x2), or GL plus CONSTANT_DEMOTION_ENABLE for ir3 (0x5).
    pub const fn sp_mode_cntl(self) -> u32 {
        let r = a6xx::SP_MODE_CNTL::new();
        match self {
            ShaderKind::QcomCl => r.with_isammode(IsamMode::CL),
            ShaderKind::Ir3 { .. } => r.with_isammode(IsamMode::GL).with_constant_demotion_enable(true),
        }
        .bits()
    }

    /// TPL1_MODE_CNTL: ISAMMODE CL (0x1) or GL (0x2).
    pub const fn tpl1_mode_cntl(self) -> u32 {
        let mode = match self {
            ShaderKind::QcomCl => IsamMode::CL,
            ShaderKind::Ir3 { .. } => IsamMode::GL,
        };
        a6xx::TPL1_MODE_CNTL::new().with_isammode(mode).bits()
    }
}

/// What the command stream needs to know about a compiled kernel (from the shader blob's metadata).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelInfo {
    /// Shader machine-code size in bytes.
    pub image_size: u32,
    /// First-exec offset (SP_CS_PROGRAM_COUNTER_OFFSET).
    pub prg_offset: u32,
    /// Full and half register footprints.
    pub fregs: u32,
    pub hregs: u32,
    /// BRANCHSTACK as written to the register (the CL blob's value halved).
    pub branchstack: u32,
    /// Private memory bytes per work item.
    pub pvtmem: u32,
    /// Local (shared) memory bytes.
    pub shmem: u32,
}

impl KernelInfo {
    /// The instruction size in 128-byte units (SP_CS_INSTR_SIZE and the shader CP_LOAD_STATE6 NUM_UNIT).
    pub const fn instr_units(&self) -> u32 {
        self.image_size.div_ceil(128)
    }

    /// SP_CS_PVT_MEM_PARAM MEMSIZEPERITEM: private memory in 512-byte units.
    pub const fn pvtmem_per_item(&self) -> u32 {
        (round_up(self.pvtmem as u64, 512) >> 9) as u32
    }

    /// SP_CS_PVT_MEM_SIZE, written raw (Mesa declares shr=12; tinygrad does not shift).
    pub const fn pvtmem_size_total(&self) -> u32 {
        self.pvtmem_per_item() * 128 * 2
    }

    /// SP_CS_PVT_MEM_STACK_OFFSET, written raw; 4096 when there is no private memory.
    pub const fn hw_stack_offset(&self) -> u32 {
        let per_item = round_up(self.pvtmem as u64, 512);
        let pow2 = if per_item == 0 { 1 } else { per_item.next_power_of_two() };
        round_up(pow2 * 128 * 16, 0x1000) as u32
    }

    /// Minimum size of the private-memory (stack) buffer.
    pub const fn stack_bytes(&self) -> u64 {
        self.hw_stack_offset() as u64 * 4
    }

    /// SP_CS_CNTL_1 SHARED_SIZE: `max(1, floor((shmem - 1) / 1024))`, so at least 1 even without local memory.
    pub const fn shared_size(&self) -> u32 {
        let v = (self.shmem as i64 - 1).div_euclid(1024);
        if v < 1 {
            1
        } else {
            v as u32
        }
    }

    /// SP_CS_CNTL_0: HALFREGFOOTPRINT, FULLREGFOOTPRINT, BRANCHSTACK; THREADSIZE = THREAD64. Needs [`Self::validate`].
    pub const fn cs_cntl_0(&self) -> u32 {
        a6xx::SP_CS_CNTL_0::new()
            .with_halfregfootprint(self.hregs)
            .with_fullregfootprint(self.fregs)
            .with_branchstack(self.branchstack)
            .with_threadsize(ThreadSize::THREAD64)
            .bits()
    }

    /// SP_CS_CNTL_1: SHARED_SIZE plus CONSTANTRAMMODE = CONSTLEN_256 (tinygrad: "should this be CONSTLEN_512?").
    pub const fn cs_cntl_1(&self) -> u32 {
        a6xx::SP_CS_CNTL_1::new()
            .with_shared_size(self.shared_size())
            .with_constantrammode(ConstRamMode::CONSTLEN_256)
            .bits()
    }

    /// The largest work-group size the register footprint allows.
    pub const fn max_threads(&self) -> u32 {
        let regs = self.fregs + self.hregs.div_ceil(2);
        let regs = if regs == 0 { 1 } else { regs };
        let t = (384 * 32) / (regs * 128) * 128;
        if t < 1024 {
            t
        } else {
            1024
        }
    }

    /// Checks that every derived value fits its register field.
    pub fn validate(&self) -> Result<(), DispatchError> {
        use a6xx::{SP_CS_CNTL_0 as CNTL_0, SP_CS_CNTL_1 as CNTL_1};
        let fields = [
            ("hregs", self.hregs, CNTL_0::HALFREGFOOTPRINT_MAX),
            ("fregs", self.fregs, CNTL_0::FULLREGFOOTPRINT_MAX),
            ("branchstack", self.branchstack, CNTL_0::BRANCHSTACK_MAX),
            ("shared size", self.shared_size(), CNTL_1::SHARED_SIZE_MAX),
            ("private memory per item", self.pvtmem_per_item(), a6xx::SP_CS_PVT_MEM_PARAM::MEMSIZEPERITEM_MAX),
            ("private memory total", self.pvtmem_size_total(), a6xx::SP_CS_PVT_MEM_SIZE::TOTALPVTMEMSIZE_MAX),
            ("instruction units", self.instr_units(), load_state::MAX_UNITS),
        ];
        for (name, v, max) in fields {
            if v > max {
                return fail(format!("{name} {v} does not fit its field (max {max})"));
            }
        }
        if self.image_size == 0 {
            return fail("empty shader image");
        }
        Ok(())
    }
}

/// Launch dimensions: work-group counts, work-group size, and the exact total of work items per axis (which may
/// stop short of `groups * local`; the last group is then partial).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    pub groups: [u32; 3],
    pub local: [u32; 3],
    pub global: [u32; 3],
}

impl Launch {
    /// `groups` full work-groups of `local` items.
    pub fn from_groups(groups: [u32; 3], local: [u32; 3]) -> Result<Self, DispatchError> {
        let mut global = [0; 3];
        for i in 0..3 {
            global[i] = groups[i]
                .checked_mul(local[i])
                .ok_or_else(|| DispatchError(format!("global size {} x {} overflows", groups[i], local[i])))?;
        }
        Launch { groups, local, global }.checked()
    }

    /// Exactly `global` work items in groups of `local` (the last group may be partial).
    pub fn from_global(global: [u32; 3], local: [u32; 3]) -> Result<Self, DispatchError> {
        if local.contains(&0) {
            return fail(format!("local size {local:?} has a zero"));
        }
        let groups = [0, 1, 2].map(|i| global[i].div_ceil(local[i]));
        Launch { groups, local, global }.checked()
    }

    fn checked(self) -> Result<Self, DispatchError> {
        for i in 0..3 {
            let (g, l, n) = (self.groups[i], self.local[i], self.global[i]);
            if !(1..=1024).contains(&l) {
                return fail(format!("local size {:?} must be within 1..=1024 per axis", self.local));
            }
            if g == 0 || n == 0 {
                return fail(format!("empty launch: groups {:?}, global {:?}", self.groups, self.global));
            }
            if n.div_ceil(l) != g {
                return fail(format!("{n} work items in groups of {l} is not {g} groups"));
            }
        }
        Ok(self)
    }

    /// SP_CS_NDRANGE_0: KERNELDIM = 3 and the local size minus one per axis.
    pub const fn ndrange_0(&self) -> u32 {
        a6xx::SP_CS_NDRANGE_0::new()
            .with_kerneldim(3)
            .with_localsizex(self.local[0] - 1)
            .with_localsizey(self.local[1] - 1)
            .with_localsizez(self.local[2] - 1)
            .bits()
    }

    pub fn threads_per_group(&self) -> u32 {
        self.local.iter().product()
    }
}

/// Bytes of the constant file at the start of every argument block.
pub const CONST_FILE_BYTES: u32 = 2048;
/// Bytes per texture or IBO descriptor.
pub const DESCRIPTOR_BYTES: u32 = 0x40;
/// Bytes per sampler.
pub const SAMPLER_BYTES: u32 = 16;
/// Bytes the constants CP_LOAD_STATE6 reads from the block's start (256 vec4), whatever the block's size.
pub const CONST_LOAD_BYTES: u32 = 4096;
/// Most textures one dispatch can bind.
pub const MAX_TEXTURES: u32 = 16;

/// Where the descriptors live inside a kernel-argument block (tinygrad's `QCOMArgsState`). The CL path puts IBOs
/// first, ir3 textures first; samplers follow both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgsLayout {
    pub tex_cnt: u32,
    pub ibo_cnt: u32,
    pub samp_cnt: u32,
    pub tex_off: u32,
    pub ibo_off: u32,
    pub samp_off: u32,
    /// The block size, a multiple of 256 bytes.
    pub size: u32,
}

impl ArgsLayout {
    pub fn new(kind: ShaderKind, tex_cnt: u32, ibo_cnt: u32, samp_cnt: u32) -> Result<Self, DispatchError> {
        if tex_cnt > MAX_TEXTURES {
            return fail(format!("{tex_cnt} textures, at most {MAX_TEXTURES} are supported"));
        }
        if ibo_cnt > a6xx::SP_CS_CONFIG::NUAV_MAX || samp_cnt > a6xx::SP_CS_CONFIG::NSAMP_MAX {
            return fail(format!("{ibo_cnt} IBOs / {samp_cnt} samplers do not fit SP_CS_CONFIG"));
        }
        let (tex_off, ibo_off) = match kind {
            ShaderKind::QcomCl => (CONST_FILE_BYTES + DESCRIPTOR_BYTES * ibo_cnt, CONST_FILE_BYTES),
            ShaderKind::Ir3 { .. } => (CONST_FILE_BYTES, CONST_FILE_BYTES + DESCRIPTOR_BYTES * tex_cnt),
        };
        let samp_off = CONST_FILE_BYTES + DESCRIPTOR_BYTES * (tex_cnt + ibo_cnt);
        let size = round_up((samp_off + SAMPLER_BYTES * samp_cnt) as u64, 0x100) as u32;
        Ok(ArgsLayout { tex_cnt, ibo_cnt, samp_cnt, tex_off, ibo_off, samp_off, size })
    }

    /// The bytes from the block's start that the GPU may read: the block, or the 4 KiB constant load if larger.
    pub const fn footprint(&self) -> u32 {
        if self.size > CONST_LOAD_BYTES {
            self.size
        } else {
            CONST_LOAD_BYTES
        }
    }

    /// SP_CS_CONFIG: ENABLED, NTEX, NSAMP, NUAV.
    pub const fn sp_cs_config(&self) -> u32 {
        a6xx::SP_CS_CONFIG::new()
            .with_enabled(true)
            .with_ntex(self.tex_cnt)
            .with_nsamp(self.samp_cnt)
            .with_nuav(self.ibo_cnt)
            .bits()
    }
}

/// Image formats the texture descriptors support.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFormat {
    /// FMT6_32_32_32_32_FLOAT.
    Rgba32F,
    /// FMT6_16_16_16_16_FLOAT.
    Rgba16F,
}

impl ImageFormat {
    pub const fn fmt6(self) -> u32 {
        match self {
            ImageFormat::Rgba32F => 130,
            ImageFormat::Rgba16F => 98,
        }
    }

    /// Bytes per pixel (4 channels).
    pub const fn pixel_bytes(self) -> u32 {
        match self {
            ImageFormat::Rgba32F => 16,
            ImageFormat::Rgba16F => 8,
        }
    }
}

/// A linear 2-D image bound as a texture (read) or an IBO (write).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Image {
    pub format: ImageFormat,
    pub width: u32,
    pub height: u32,
    /// Row pitch in bytes: a multiple of 64 and at least `width * pixel_bytes`.
    pub pitch: u32,
}

/// Largest image width in pixels.
pub const MAX_IMAGE_WIDTH: u32 = 16384;

impl Image {
    /// The bytes the image spans from its base: `pitch * height`.
    pub const fn span(&self) -> u64 {
        self.pitch as u64 * self.height as u64
    }

    pub fn validate(&self) -> Result<(), DispatchError> {
        if !(1..=MAX_IMAGE_WIDTH).contains(&self.width) || !(1..=0x7fff).contains(&self.height) {
            return fail(format!("image size {}x{} out of range", self.width, self.height));
        }
        let row = self.width as u64 * self.format.pixel_bytes() as u64;
        if !self.pitch.is_multiple_of(64) || (self.pitch as u64) < row || self.pitch >= 1 << 22 {
            return fail(format!(
                "image pitch {} invalid for a row of {row} bytes (multiple of 64 needed)",
                self.pitch
            ));
        }
        Ok(())
    }

    /// The 16-dword descriptor with `base` as the image address; IBO descriptors carry only the format in dword 0.
    pub fn descriptor(&self, base: u64, ibo: bool) -> Result<[u32; 16], DispatchError> {
        self.validate()?;
        let mut d = [0u32; 16];
        let fmt = self.format.fmt6() << 22;
        // dw0 bit 3 and dw7 = 13 are raw values matched against Qualcomm's driver; their meaning is unknown.
        d[0] = if ibo { fmt } else { 0x8 | (1 << 7) | (2 << 10) | (3 << 13) | fmt };
        d[1] = self.width | (self.height << 15);
        d[2] = (self.pitch.trailing_zeros() - 6) | (self.pitch << 7) | (1 << 29);
        d[4] = base as u32;
        d[5] = (base >> 32) as u32;
        d[6] = 0x4000_0000;
        d[7] = 13;
        Ok(d)
    }
}

/// Parses a descriptor written by [`Image::descriptor`]: the image, its base address, and whether it is an IBO.
pub fn parse_image_descriptor(d: &[u32; 16]) -> Result<(Image, u64, bool), DispatchError> {
    let fmt = d[0] >> 22;
    let format = match fmt {
        130 => ImageFormat::Rgba32F,
        98 => ImageFormat::Rgba16F,
        _ => return fail(format!("descriptor format {fmt} is not RGBA32F or RGBA16F")),
    };
    let ibo = d[0] & 0x3f_ffff == 0;
    let image = Image { format, width: d[1] & 0x7fff, height: (d[1] >> 15) & 0x7fff, pitch: (d[2] >> 7) & 0x3f_ffff };
    image.validate()?;
    if image.descriptor(0, ibo)?[..4] != d[..4] {
        return fail(format!("descriptor words {:#x?} are not a linear 2-D image", &d[..4]));
    }
    Ok((image, pm4::addr64(d[4], d[5]), ibo))
}

/// The sampler tinygrad binds: clamp-to-border, nearest, unnormalized coordinates.
pub const SAMPLER_CLAMP_NEAREST: [u32; 4] = [0x1b60, 0x30, 0, 0];

/// A kernel-argument block: the 2 KiB constant file followed by descriptors, with relocations for the pointers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgsBlock {
    layout: ArgsLayout,
    buf: RelocBuf,
}

impl ArgsBlock {
    /// A zeroed block for `layout`.
    pub fn new(layout: ArgsLayout) -> Self {
        ArgsBlock { layout, buf: RelocBuf::zeroed(layout.size as usize / 4) }
    }

    pub fn layout(&self) -> &ArgsLayout {
        &self.layout
    }

    pub fn buf(&self) -> &RelocBuf {
        &self.buf
    }

    pub fn into_buf(self) -> RelocBuf {
        self.buf
    }

    fn const_slot(&self, byte_off: u32, len: u32) -> Result<usize, DispatchError> {
        if !byte_off.is_multiple_of(4) || byte_off + len > CONST_FILE_BYTES {
            return fail(format!("constant at byte {byte_off} (+{len}) is unaligned or outside the constant file"));
        }
        Ok(byte_off as usize / 4)
    }

    /// Writes a 32-bit constant at `byte_off` of the constant file.
    pub fn set_u32(&mut self, byte_off: u32, v: u32) -> Result<(), DispatchError> {
        let at = self.const_slot(byte_off, 4)?;
        self.buf.set(at, v);
        Ok(())
    }

    /// Writes a 64-bit GPU pointer at `byte_off` of the constant file.
    pub fn set_ptr(&mut self, byte_off: u32, addr: Addr) -> Result<(), DispatchError> {
        let at = self.const_slot(byte_off, 8)?;
        self.buf.set(at, addr);
        Ok(())
    }

    /// ir3 only: the local size as 3 x u32 at constant `wgsz` (skipped when `wgsz` is 0xfc, "unused").
    pub fn set_local_size(&mut self, kind: ShaderKind, local: [u32; 3]) -> Result<(), DispatchError> {
        if let ShaderKind::Ir3 { wgsz, .. } = kind {
            if wgsz != 0xfc {
                for (i, l) in local.iter().enumerate() {
                    self.set_u32(wgsz as u32 * 4 + 4 * i as u32, *l)?;
                }
            }
        }
        Ok(())
    }

    fn set_descriptor(&mut self, off: u32, image: &Image, base: Addr, ibo: bool) -> Result<(), DispatchError> {
        let d = image.descriptor(0, ibo)?;
        let at = off as usize / 4;
        for (i, w) in d.iter().enumerate() {
            self.buf.set(at + i, *w);
        }
        self.buf.set(at + 4, base);
        Ok(())
    }

    /// Texture descriptor `i`.
    pub fn set_texture(&mut self, i: u32, image: &Image, base: Addr) -> Result<(), DispatchError> {
        if i >= self.layout.tex_cnt {
            return fail(format!("texture {i} out of {}", self.layout.tex_cnt));
        }
        self.set_descriptor(self.layout.tex_off + DESCRIPTOR_BYTES * i, image, base, false)
    }

    /// IBO (writable image) descriptor `i`.
    pub fn set_ibo(&mut self, i: u32, image: &Image, base: Addr) -> Result<(), DispatchError> {
        if i >= self.layout.ibo_cnt {
            return fail(format!("IBO {i} out of {}", self.layout.ibo_cnt));
        }
        self.set_descriptor(self.layout.ibo_off + DESCRIPTOR_BYTES * i, image, base, true)
    }

    /// Sampler `i`.
    pub fn set_sampler(&mut self, i: u32, words: [u32; 4]) -> Result<(), DispatchError> {
        if i >= self.layout.samp_cnt {
            return fail(format!("sampler {i} out of {}", self.layout.samp_cnt));
        }
        let at = (self.layout.samp_off + SAMPLER_BYTES * i) as usize / 4;
        for (k, w) in words.iter().enumerate() {
            self.buf.set(at + k, *w);
        }
        Ok(())
    }
}

/// One kernel launch: what [`CmdStream::exec`] encodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exec {
    pub kind: ShaderKind,
    pub kernel: KernelInfo,
    pub launch: Launch,
    pub layout: ArgsLayout,
    /// The shader image.
    pub shader: Addr,
    /// The kernel-argument block (at least `layout.footprint()` readable bytes).
    pub args: Addr,
    /// The private-memory buffer (at least `kernel.stack_bytes()`).
    pub stack: Addr,
    /// The zeroed border-color buffer; used only with samplers.
    pub border_color: Addr,
    /// The scratch page for the trailing cache-flush timestamp.
    pub dummy: Addr,
}

/// Which steps of a cache flush to emit, in the fixed order write-back, invalidate, memory-write sync, idle sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheFlush {
    pub write_back: bool,
    pub invalidate: bool,
    pub wait_mem_writes: bool,
    pub wait_for_idle: bool,
}

impl CacheFlush {
    pub const ALL: CacheFlush =
        CacheFlush { write_back: true, invalidate: true, wait_mem_writes: true, wait_for_idle: true };
}

/// A PM4 command stream under construction, with relocations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CmdStream {
    buf: RelocBuf,
}

impl CmdStream {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn buf(&self) -> &RelocBuf {
        &self.buf
    }

    pub fn into_buf(self) -> RelocBuf {
        self.buf
    }

    /// A type-7 packet. Panics if the payload exceeds the 14-bit count (a builder bug).
    pub fn pkt7(&mut self, op: Opcode, payload: &[Word]) {
        let cnt: usize = payload.iter().map(Word::len).sum();
        assert!(cnt <= pm4::PKT7_MAX_COUNT, "{op} payload of {cnt} dwords");
        self.buf.push(pm4::pkt7_hdr(op as u8, cnt as u32));
        self.buf.extend(payload);
    }

    /// A type-4 packet writing consecutive registers from `reg`. Panics on an empty or oversized write.
    pub fn pkt4(&mut self, reg: u32, values: &[Word]) {
        let cnt: usize = values.iter().map(Word::len).sum();
        assert!((1..=pm4::PKT4_MAX_COUNT).contains(&cnt), "register write of {cnt} dwords");
        self.buf.push(pm4::pkt4_hdr(reg, cnt as u32));
        self.buf.extend(values);
    }

    /// GPU-side wait until the low 32 bits at `addr` are >= `value` (busy poll, 32-cycle delay).
    pub fn wait_ge(&mut self, addr: Addr, value: Word) {
        let d0 = wait_reg_mem::WRITE_GE | wait_reg_mem::POLL_MEMORY;
        self.pkt7(Opcode::WaitRegMem, &[d0.into(), addr.into(), value, 0xffff_ffff.into(), 32.into()]);
    }

    /// The enabled steps of a cache flush; the write-back's timestamp goes to `dummy`.
    pub fn cache_flush(&mut self, f: CacheFlush, dummy: Addr) {
        if f.write_back {
            self.flush_ts(dummy, 0.into());
        }
        if f.invalidate {
            self.pkt7(Opcode::EventWrite, &[event::CACHE_INVALIDATE.into()]);
        }
        if f.wait_mem_writes {
            self.pkt7(Opcode::WaitMemWrites, &[]);
        }
        if f.wait_for_idle {
            self.pkt7(Opcode::WaitForIdle, &[]);
        }
    }

    /// A full memory barrier (9 dwords).
    pub fn memory_barrier(&mut self, dummy: Addr) {
        self.cache_flush(CacheFlush::ALL, dummy);
    }

    fn flush_ts(&mut self, addr: Addr, value: Word) {
        self.pkt7(Opcode::EventWrite, &[event::CACHE_FLUSH_TS.into(), addr.into(), value]);
    }

    /// Waits for idle, then writes the 32-bit `value` to `sig` after a cache write-back, then flushes again to
    /// `dummy`.
    pub fn signal(&mut self, sig: Addr, value: Word, dummy: Addr) {
        self.pkt7(Opcode::WaitForIdle, &[]);
        self.flush_ts(sig, value);
        self.flush_ts(dummy, 0.into());
    }

    /// Waits for idle, then stores the 64-bit always-on counter (19.2 MHz) in the signal's timestamp (`sig + 8`).
    pub fn timestamp(&mut self, sig: Addr) {
        self.pkt7(Opcode::WaitForIdle, &[]);
        let d0 = pm4::reg_to_mem_dword0(reg::CP_ALWAYS_ON_COUNTER, 2, true);
        self.pkt7(Opcode::RegToMem, &[d0.into(), sig.add(SIGNAL_TIMESTAMP).into()]);
    }

    /// One kernel launch, exactly as tinygrad's `QCOMComputeQueue.exec`.
    pub fn exec(&mut self, e: &Exec) -> Result<(), DispatchError> {
        let k = &e.kernel;
        let l = &e.layout;
        k.validate()?;
        if e.launch.threads_per_group() > k.max_threads() {
            return fail(format!(
                "too many resources requested for launch: {} threads per group, the kernel allows {}",
                e.launch.threads_per_group(),
                k.max_threads()
            ));
        }
        let imm = |v: u32| Word::Imm(v);
        self.pkt7(Opcode::SetMarker, &[imm(pm4::RM6_COMPUTE)]);
        let update = a6xx::SP_UPDATE_CNTL::new().with_cs_state(true).with_cs_uav(true);
        self.pkt4(reg::SP_UPDATE_CNTL, &[imm(update.bits())]);
        self.pkt4(reg::SP_UPDATE_CNTL, &[imm(0)]);
        // "is this right? mesa uses 1": TSIZE 0x80 and USIZE 0x40 are copied from Qualcomm's driver.
        self.pkt4(reg::SP_CS_TSIZE, &[imm(0x80)]);
        self.pkt4(reg::SP_CS_USIZE, &[imm(0x40)]);
        self.pkt4(reg::SP_MODE_CNTL, &[imm(e.kind.sp_mode_cntl())]);
        self.pkt4(reg::SP_PERFCTR_SHADER_MASK, &[imm(a6xx::SP_PERFCTR_SHADER_MASK::new().with_cs(true).bits())]);
        self.pkt4(reg::TPL1_MODE_CNTL, &[imm(e.kind.tpl1_mode_cntl())]);
        self.pkt4(reg::TPL1_DBG_ECO_CNTL, &[imm(0)]);
        self.pkt7(Opcode::WaitForIdle, &[]);

        let (g, n) = (e.launch.groups, e.launch.global);
        // The CL path's constant ids are Qualcomm's; ir3 rewrites SP_CS_CONST_CONFIG_0 before launching.
        let const_config_0 = a6xx::SP_CS_CONST_CONFIG_0::new()
            .with_wgidconstid(0xcf)
            .with_wgsizeconstid(0xc0)
            .with_wgoffsetconstid(0xcc);
        let ndrange =
            [e.launch.ndrange_0(), n[0], 0, n[1], 0, n[2], 0, const_config_0.bits(), wge_cntl(), g[0], g[1], g[2]];
        self.pkt4(reg::SP_CS_NDRANGE_0, &ndrange.map(imm));
        self.pkt4(
            reg::SP_CS_CNTL_0,
            &[
                imm(k.cs_cntl_0()),
                imm(k.cs_cntl_1()),
                imm(0),
                imm(k.prg_offset),
                e.shader.into(),
                imm(a6xx::SP_CS_PVT_MEM_PARAM::new().with_memsizeperitem(k.pvtmem_per_item()).bits()),
                e.stack.into(),
                imm(a6xx::SP_CS_PVT_MEM_SIZE::new().with_totalpvtmemsize(k.pvtmem_size_total()).bits()),
            ],
        );

        let units = k.instr_units();
        let ls = |st, sb, n| imm(load_state::dword0(0, st, load_state::SS6_INDIRECT, sb, n));
        use load_state::{SB6_CS_SHADER, SB6_CS_TEX, ST6_UAV, ST_CONSTANTS, ST_SHADER};
        self.pkt7(Opcode::LoadState6Frag, &[ls(ST_CONSTANTS, SB6_CS_SHADER, 256), e.args.into()]);
        self.pkt7(Opcode::LoadState6Frag, &[ls(ST_SHADER, SB6_CS_SHADER, units), e.shader.into()]);
        self.pkt4(reg::SP_REG_PROG_ID_0, &prog_id_and_const_config().map(imm));
        self.pkt4(reg::SP_CS_PVT_MEM_STACK_OFFSET, &[imm(k.hw_stack_offset())]);
        self.pkt4(reg::SP_CS_INSTR_SIZE, &[imm(units)]);

        if l.samp_cnt > 0 {
            let samp = e.args.add(l.samp_off as u64);
            self.pkt7(Opcode::LoadState6Frag, &[ls(ST_SHADER, SB6_CS_TEX, l.samp_cnt), samp.into()]);
            self.pkt4(reg::SP_CS_SAMPLER_BASE, &[samp.into()]);
            self.pkt4(reg::TPL1_CS_BORDER_COLOR_BASE, &[e.border_color.into()]);
        }
        if l.tex_cnt > 0 {
            let tex = e.args.add(l.tex_off as u64);
            self.pkt7(Opcode::LoadState6Frag, &[ls(ST_CONSTANTS, SB6_CS_TEX, l.tex_cnt), tex.into()]);
            self.pkt4(reg::SP_CS_TEXMEMOBJ_BASE, &[tex.into()]);
        }
        if l.ibo_cnt > 0 {
            let ibo = e.args.add(l.ibo_off as u64);
            self.pkt7(Opcode::LoadState6Frag, &[ls(ST6_UAV, SB6_CS_SHADER, l.ibo_cnt), ibo.into()]);
            self.pkt4(reg::SP_CS_UAV_BASE, &[ibo.into()]);
        }
        self.pkt4(reg::SP_CS_CONFIG, &[imm(l.sp_cs_config())]);

        match e.kind {
            ShaderKind::QcomCl => self.pkt7(Opcode::RunOpenCl, &[imm(0)]),
            ShaderKind::Ir3 { wgid, wgsz, lid } => {
                let cfg0 = a6xx::SP_CS_CONST_CONFIG_0::new()
                    .with_wgidconstid(wgid as u32)
                    .with_wgsizeconstid(wgsz as u32)
                    .with_wgoffsetconstid(REGID_UNUSED)
                    .with_localidregid(lid as u32);
                self.pkt4(reg::SP_CS_CONST_CONFIG_0, &[imm(cfg0.bits()), imm(wge_cntl())]);
                self.pkt7(Opcode::ExecCs, &[imm(0), imm(g[0]), imm(g[1]), imm(g[2])]);
            }
        }
        self.flush_ts(e.dummy, 0.into());
        Ok(())
    }
}

/// SP_CS_WGE_CNTL: no linear local id, THREAD64.
const fn wge_cntl() -> u32 {
    a6xx::SP_CS_WGE_CNTL::new().with_linearlocalidregid(REGID_UNUSED).with_threadsize(ThreadSize::THREAD64).bits()
}

/// SP_REG_PROG_ID_0..3 (every fragment input register id unused) and SP_CS_CONST_CONFIG after them. tinygrad asks
/// for CONSTLEN=256 without Mesa's shift or mask, which lands on ENABLED: the value is ENABLED alone.
const fn prog_id_and_const_config() -> [u32; 5] {
    let u = REGID_UNUSED;
    let id0 = a6xx::SP_REG_PROG_ID_0::new().with_faceregid(u).with_sampleid(u).with_samplemask(u).with_centerrhw(u);
    let id1 = a6xx::SP_REG_PROG_ID_1::new()
        .with_ij_persp_pixel(u)
        .with_ij_linear_pixel(u)
        .with_ij_persp_centroid(u)
        .with_ij_linear_centroid(u);
    let id2 = a6xx::SP_REG_PROG_ID_2::new()
        .with_ij_persp_sample(u)
        .with_ij_linear_sample(u)
        .with_xycoordregid(u)
        .with_zwcoordregid(u);
    let id3 = a6xx::SP_REG_PROG_ID_3::new().with_linelengthregid(u);
    let const_config = a6xx::SP_CS_CONST_CONFIG::new().with_enabled(true);
    [id0.bits(), id1.bits(), id2.bits(), id3.bits(), const_config.bits()]
}

#[cfg(test)]
mod tests;
