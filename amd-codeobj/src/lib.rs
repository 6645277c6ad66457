//! pilot-amd-codeobj: HSA code objects for RDNA3 (gfx1100) and RDNA4 (gfx1201): read, cross-checked, and reduced to
//! what a dispatch needs.
//!
//! [`CodeObject::parse`] reads the ELF ([`elf`]), the metadata note ([`msgpack`], [`metadata`]) and each
//! kernel's 64-byte descriptor `NAME.kd` ([`descriptor`]), then checks that they agree with each other
//! and that every bit set is one pilot's dispatch accounts for. Anything else — an unknown descriptor
//! bit, a dynamic stack, a dispatch or queue pointer, wave64, an argument kind pilot does not fill,
//! relocations left for a loader — is a one-line [`CodeObjectError`] naming the kernel and the field.
//! The compiler runs it on every code object it writes, so a bad one is refused at compile time.
//!
//! The dispatch (tinygrad `tinygrad/runtime/ops_amd.py` `AMDProgram` and `AMDComputeQueue.exec`)
//! copies [`CodeObject::image`] to the GPU and per kernel programs COMPUTE_PGM_LO/HI with the code
//! address `>> 8`, COMPUTE_PGM_RSRC1/2/3 from the descriptor (LDS granules in rsrc2), and
//! COMPUTE_USER_DATA_0.. with [`Kernel::user_sgprs`] values: the kernarg address in the first two,
//! zero in the rest.

pub mod descriptor;
pub mod elf;
pub mod metadata;
pub mod msgpack;

use pilot_core::Arch;

pub use descriptor::Descriptor;

/// Why a code object is refused. Display is one line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CodeObjectError {
    #[error("code object: {0}")]
    Elf(String),
    #[error("code object metadata: {0}")]
    Msgpack(#[from] msgpack::DecodeError),
    #[error("code object metadata: {field} {msg}")]
    Metadata { field: String, msg: String },
    #[error("code object: kernel `{kernel}`: {field} {msg}")]
    Kernel { kernel: String, field: String, msg: String },
}

/// A field and what is wrong with it (the parts' errors, before the kernel is named).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub field: String,
    pub msg: String,
}

/// A code object pilot can dispatch every kernel of.
#[derive(Clone, Debug)]
pub struct CodeObject {
    pub arch: Arch,
    /// Code object version (4, 5 or 6).
    pub version: u32,
    /// The image to copy to the GPU; offsets in it are the addresses the code was linked at.
    pub image: Vec<u8>,
    /// In metadata order.
    pub kernels: Vec<Kernel>,
}

/// What dispatching one kernel needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    pub name: String,
    /// Image offset of the kernel descriptor (64-byte aligned).
    pub descriptor_offset: u64,
    /// Image offset of the first instruction (256-byte aligned: COMPUTE_PGM_LO holds address >> 8).
    pub code_offset: u64,
    pub descriptor: Descriptor,
    /// Bytes of the kernarg segment, and its alignment.
    pub kernarg_size: u32,
    pub kernarg_align: u32,
    /// Byte offset in the kernarg segment of each buffer argument's 64-bit address, in argument order.
    pub arg_offsets: Vec<u32>,
    /// Registers the kernel uses (metadata), per work-item and per wave.
    pub vgprs: u32,
    pub sgprs: u32,
    /// LDS bytes per work-group.
    pub lds_bytes: u32,
    /// Scratch bytes per work-item.
    pub scratch_bytes: u32,
    /// Always true: wave64 is refused.
    pub wave32: bool,
    /// SGPRs the hardware loads from COMPUTE_USER_DATA_*: the kernarg address in s[0:1], then zeros.
    pub user_sgprs: u32,
    /// Which workgroup ids the hardware writes into SGPRs after the user SGPRs.
    pub workgroup_ids: [bool; 3],
    /// Work-item id dimensions the hardware writes into v0 (1 to 3).
    pub workitem_id_dims: u32,
    /// The largest work-group the kernel was compiled for.
    pub max_workgroup_size: u32,
    /// The work-group size the kernel was compiled for exactly (`reqd_work_group_size`), if pinned.
    pub reqd_workgroup_size: Option<[u32; 3]>,
}

impl Kernel {
    /// The dispatch record an artifact carries for this kernel (`pilot_core::artifact::AmdDispatch`): what the
    /// compiler writes and what a device checks at load against the code object it was given.
    pub fn dispatch_record(&self) -> pilot_core::artifact::AmdDispatch {
        let d = &self.descriptor;
        pilot_core::artifact::AmdDispatch {
            descriptor: self.descriptor_offset,
            code: self.code_offset,
            rsrc: [d.compute_pgm_rsrc1, d.compute_pgm_rsrc2, d.compute_pgm_rsrc3],
            kernarg_size: self.kernarg_size,
            kernarg_align: self.kernarg_align,
            arg_offsets: self.arg_offsets.clone(),
            user_sgprs: self.user_sgprs,
            vgprs: self.vgprs,
            sgprs: self.sgprs,
            lds: self.lds_bytes,
            scratch: self.scratch_bytes,
            wave32: self.wave32,
        }
    }
}

impl CodeObject {
    /// Reads and checks `data`; see the module doc for what is refused.
    pub fn parse(data: &[u8]) -> Result<CodeObject, CodeObjectError> {
        let e = elf::read(data).map_err(CodeObjectError::Elf)?;
        let doc = msgpack::decode(e.metadata)?;
        let target = format!("amdgcn-amd-amdhsa--{}", e.arch);
        let metas =
            metadata::kernels(&doc, &target).map_err(|r| CodeObjectError::Metadata { field: r.field, msg: r.msg })?;
        if metas.is_empty() {
            return Err(CodeObjectError::Metadata { field: "amdhsa.kernels".into(), msg: "is empty".into() });
        }
        let mut kernels = Vec::with_capacity(metas.len());
        for m in &metas {
            let k = kernel(&e, m).map_err(|r| CodeObjectError::Kernel {
                kernel: m.name.clone(),
                field: r.field,
                msg: r.msg,
            })?;
            if kernels.iter().any(|o: &Kernel| o.name == k.name) {
                return Err(CodeObjectError::Metadata {
                    field: format!("kernel `{}`", k.name),
                    msg: "listed twice".into(),
                });
            }
            kernels.push(k);
        }
        // Every exported descriptor belongs to a kernel the metadata describes.
        if let Some(s) = e.symbols.iter().find(|s| s.name.ends_with(".kd") && !metas.iter().any(|m| m.symbol == s.name))
        {
            return Err(CodeObjectError::Elf(format!("descriptor `{}` has no metadata", s.name)));
        }
        Ok(CodeObject { arch: e.arch, version: e.version, image: e.image, kernels })
    }

    /// The kernel named `name`.
    pub fn kernel(&self, name: &str) -> Option<&Kernel> {
        self.kernels.iter().find(|k| k.name == name)
    }
}

fn refuse(field: impl Into<String>, msg: impl Into<String>) -> Refusal {
    Refusal { field: field.into(), msg: msg.into() }
}

/// One kernel: its descriptor read from the image and checked against the metadata and the symbols.
fn kernel(e: &elf::Elf, m: &metadata::KernelMeta) -> Result<Kernel, Refusal> {
    if m.symbol != format!("{}.kd", m.name) {
        return Err(refuse("metadata .symbol", format!("is `{}`, not `{}.kd`", m.symbol, m.name)));
    }
    let kd = e
        .symbols
        .iter()
        .find(|s| s.name == m.symbol)
        .ok_or_else(|| refuse(format!("symbol `{}`", m.symbol), "is not exported"))?;
    if kd.kind != object::elf::STT_OBJECT || kd.size != descriptor::SIZE as u64 || kd.value % 64 != 0 {
        return Err(refuse(
            format!("symbol `{}`", m.symbol),
            format!(
                "is not a 64-byte, 64-byte aligned object (type {}, size {}, at 0x{:x})",
                kd.kind, kd.size, kd.value
            ),
        ));
    }
    let bytes: &[u8; descriptor::SIZE] = usize::try_from(kd.value)
        .ok()
        .and_then(|at| e.image.get(at..at.checked_add(descriptor::SIZE)?))
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| refuse(format!("symbol `{}`", m.symbol), "lies outside the image"))?;
    if e.code.iter().any(|r| r.contains(&kd.value)) {
        return Err(refuse(format!("symbol `{}`", m.symbol), "lies in executable memory"));
    }
    let d = Descriptor::parse(bytes)?;
    d.check(e.arch)?;

    let code = kd.value.checked_add_signed(d.kernel_code_entry_byte_offset);
    let code = code.filter(|c| e.code.iter().any(|r| r.contains(c))).ok_or_else(|| {
        refuse(
            "descriptor.kernel_code_entry_byte_offset",
            format!("{} points outside the code", d.kernel_code_entry_byte_offset),
        )
    })?;
    if code % 256 != 0 {
        return Err(refuse(
            "descriptor.kernel_code_entry_byte_offset",
            format!("code at 0x{code:x} is not 256-byte aligned"),
        ));
    }
    if let Some(f) = e.symbols.iter().find(|s| s.name == m.name) {
        if f.kind != object::elf::STT_FUNC || f.value != code {
            return Err(refuse(
                format!("symbol `{}`", m.name),
                format!("at 0x{:x} is not the descriptor's entry 0x{code:x}", f.value),
            ));
        }
    }

    // The metadata and the descriptor describe the same kernel.
    for (field, meta, desc) in [
        ("kernarg_segment_size", m.kernarg_segment_size, d.kernarg_size),
        ("group_segment_fixed_size", m.group_segment_fixed_size, d.group_segment_fixed_size),
        ("private_segment_fixed_size", m.private_segment_fixed_size, d.private_segment_fixed_size),
    ] {
        if meta != desc {
            return Err(refuse(format!("metadata .{field}"), format!("is {meta} but the descriptor says {desc}")));
        }
    }
    if m.wavefront_size != 32 {
        return Err(refuse("metadata .wavefront_size", format!("is {}: pilot dispatches wave32", m.wavefront_size)));
    }
    if m.vgpr_count > d.vgprs() {
        return Err(refuse(
            "metadata .vgpr_count",
            format!("is {} but the descriptor allocates {}", m.vgpr_count, d.vgprs()),
        ));
    }
    if descriptor::lds_granules(d.group_segment_fixed_size).is_none() {
        return Err(refuse(
            "descriptor.group_segment_fixed_size",
            format!("{} bytes do not fit rsrc2", d.group_segment_fixed_size),
        ));
    }

    // Kernargs: the pointer is the only user SGPR pilot fills, and the arguments fit the segment.
    if !m.args.is_empty() && !d.kernarg_ptr() {
        return Err(refuse(
            "kernel_code_properties.enable_sgpr_kernarg_segment_ptr",
            "is 0 but the kernel has arguments",
        ));
    }
    if d.user_sgprs() < if d.kernarg_ptr() { 2 } else { 0 } {
        return Err(refuse(
            "compute_pgm_rsrc2.user_sgpr_count",
            format!("is {}, too few for the kernarg pointer", d.user_sgprs()),
        ));
    }
    if d.user_sgprs() > 16 {
        return Err(refuse(
            "compute_pgm_rsrc2.user_sgpr_count",
            format!("is {}, more than the 16 COMPUTE_USER_DATA registers", d.user_sgprs()),
        ));
    }
    if !m.kernarg_segment_align.is_power_of_two() || m.kernarg_segment_align > 64 {
        return Err(refuse("metadata .kernarg_segment_align", format!("is {}", m.kernarg_segment_align)));
    }
    let mut end = 0;
    for (i, a) in m.args.iter().enumerate() {
        if a.offset < end || a.offset % 8 != 0 || a.offset + a.size > m.kernarg_segment_size {
            return Err(refuse(
                format!("metadata .args[{i}].offset"),
                format!(
                    "{} (size {}) overlaps, is unaligned or passes the {}-byte segment",
                    a.offset, a.size, m.kernarg_segment_size
                ),
            ));
        }
        end = a.offset + a.size;
    }
    if let Some(r) = m.reqd_workgroup_size {
        if r.iter().map(|&x| u64::from(x)).product::<u64>() > u64::from(m.max_flat_workgroup_size) {
            return Err(refuse("metadata .reqd_workgroup_size", format!("{r:?} exceeds .max_flat_workgroup_size")));
        }
    }

    Ok(Kernel {
        name: m.name.clone(),
        descriptor_offset: kd.value,
        code_offset: code,
        descriptor: d,
        kernarg_size: m.kernarg_segment_size,
        kernarg_align: m.kernarg_segment_align,
        arg_offsets: m.args.iter().map(|a| a.offset).collect(),
        vgprs: m.vgpr_count,
        sgprs: m.sgpr_count,
        lds_bytes: d.group_segment_fixed_size,
        scratch_bytes: d.private_segment_fixed_size,
        wave32: d.wave32(),
        user_sgprs: d.user_sgprs(),
        workgroup_ids: d.workgroup_ids(),
        workitem_id_dims: d.workitem_id_dims(),
        max_workgroup_size: m.max_flat_workgroup_size,
        reqd_workgroup_size: m.reqd_workgroup_size,
    })
}
