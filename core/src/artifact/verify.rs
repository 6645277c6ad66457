//! Pass two of verification: meaning. Runs on a decoded [`Manifest`] before any device is touched.
//!
//! Checks: a target its backend takes (architecture and modes, [`crate::target::Target::check`]); unique
//! input and output names; every index in range; sizes consistent with dtype × shape; weights carry
//! contents of exactly their size; every copy range lies inside its buffers; every dispatch matches
//! what its kernel was compiled for (argument count, grid, and per argument image-ness, element type
//! and the extent the kernel reaches, inside the buffer — so a step that passes cannot make a kernel
//! touch memory outside its buffers); every out-of-band record is referenced exactly once (by a
//! buffer, `_pad` or `integrity`, which is the last record), or by one or more programs (a code object
//! that exports several kernels).

use super::schema::{err, kind_name, BufferSpec, Manifest, ParamKind, ParamSpec, SchemaError};
use super::write::integrity_len;
use crate::device::{Arg, BufferUse, ImageChannel, ProgramFormat, StepOp};
use crate::dtype::DType;

/// Verifies `m` against the sizes of the container's records.
pub fn verify(m: &Manifest, record_sizes: &[u64]) -> Result<(), SchemaError> {
    m.target.check().map_err(|e| err("target", e.to_string()))?;
    if record_sizes.len() != m.blob_count {
        return Err(err(
            "blobs",
            format!("the payload lists {} records but the file holds {}", m.blob_count, record_sizes.len()),
        ));
    }
    let mut referenced = vec![None::<String>; m.blob_count];
    let mut claim = |record: usize, by: String| -> Result<(), SchemaError> {
        match referenced.get_mut(record) {
            None => Err(err(&by, format!("record {record} out of range ({} records)", m.blob_count))),
            Some(Some(first)) => Err(err(&by, format!("record {record} is already used by {first}"))),
            Some(slot) => {
                *slot = Some(by);
                Ok(())
            }
        }
    };

    for (i, b) in m.buffers.iter().enumerate() {
        let path = format!("buffers[{i}]");
        if b.size % b.dtype.size() != 0 {
            return Err(err(&path, format!("size {} is not a multiple of {} ({})", b.size, b.dtype.size(), b.dtype)));
        }
        match (b.kind, b.blob) {
            (BufferUse::Weight, None) => return Err(err(&path, "weight without contents (blob)")),
            (BufferUse::Weight | BufferUse::State, Some(r)) => {
                claim(r, format!("{path}.blob"))?;
                if record_sizes[r] != b.size as u64 {
                    return Err(err(
                        format!("{path}.blob"),
                        format!("record {r} holds {} bytes, buffer size is {}", record_sizes[r], b.size),
                    ));
                }
            }
            (_, Some(_)) => {
                return Err(err(
                    format!("{path}.blob"),
                    format!("a {} buffer has no initial contents", kind_name(b.kind)),
                ))
            }
            (_, None) => {}
        }
        if let Some(im) = b.image {
            if (im.pitch as usize) < im.row_bytes() || b.size != im.bytes() {
                return Err(err(
                    format!("{path}.image"),
                    format!(
                        "{}x{} image with pitch {} does not fit: rows need {} bytes, size must be {}",
                        im.width,
                        im.height,
                        im.pitch,
                        im.row_bytes(),
                        im.pitch as u64 * im.height as u64
                    ),
                ));
            }
            let want = match im.channel {
                ImageChannel::F32 => DType::F32,
                ImageChannel::F16 => DType::F16,
            };
            if b.dtype != want {
                return Err(err(
                    format!("{path}.dtype"),
                    format!("an image of {:?} channels holds {want}", im.channel),
                ));
            }
        }
        if b.checksum.is_some() && b.blob.is_none() {
            return Err(err(format!("{path}.checksum"), "checksum without contents"));
        }
    }
    for (i, p) in m.programs.iter().enumerate() {
        let path = format!("programs[{i}]");
        if p.name.is_empty() {
            return Err(err(format!("{path}.name"), "empty name"));
        }
        match (&p.amdgpu, p.format) {
            (Some(d), ProgramFormat::AmdCodeObject) => d.check(&format!("{path}.amdgpu"), p.args)?,
            (None, ProgramFormat::AmdCodeObject) => return Err(err(format!("{path}.amdgpu"), "missing")),
            (Some(_), _) => return Err(err(format!("{path}.amdgpu"), "only amdgpu programs have one")),
            (None, _) => {}
        }
        check_grid(&path, &p.global, &p.local)?;
        match (&p.ir3, p.format) {
            (Some(r), ProgramFormat::A6xxIr3) => {
                let code = record_sizes.get(p.blob).copied().unwrap_or(0);
                r.check(&format!("{path}.ir3"), p.args, code)?
            }
            (None, ProgramFormat::A6xxIr3) => return Err(err(format!("{path}.ir3"), "missing")),
            (Some(_), _) => return Err(err(format!("{path}.ir3"), "only ir3 programs have one")),
            (None, _) => {}
        }
        if p.params.len() != p.args {
            return Err(err(
                format!("{path}.params"),
                format!("describes {} arguments, the program takes {}", p.params.len(), p.args),
            ));
        }
        // A code object may export several kernels: programs may share a record with each other.
        let shared = m.programs[..i].iter().position(|q| q.blob == p.blob);
        if shared.is_none() {
            claim(p.blob, format!("{path}.blob"))?;
        } else if m.programs[..i].iter().any(|q| q.blob == p.blob && q.format != p.format) {
            return Err(err(format!("{path}.blob"), "programs sharing a record must have the same format"));
        }
    }
    for (k, &r) in m.pads.iter().enumerate() {
        claim(r, format!("_pad[{k}]"))?;
        if record_sizes.get(r).is_some_and(|&s| s >= 64) {
            return Err(err(format!("_pad[{k}]"), "a padding record is 64 bytes or longer"));
        }
    }
    // The last record is the integrity record (checked by `integrity::check` before decoding).
    let integrity = m.blob_count.checked_sub(1).ok_or_else(|| err("blobs", "no integrity record"))?;
    claim(integrity, "integrity".to_string())?;
    let signed = integrity_len(integrity) + super::signature::SIGNATURE_LEN as u64;
    if record_sizes[integrity] != integrity_len(integrity) && record_sizes[integrity] != signed {
        return Err(err(
            "integrity",
            format!(
                "record {integrity} holds {} bytes, an integrity table of {integrity} records is {}",
                record_sizes[integrity],
                integrity_len(integrity)
            ),
        ));
    }
    if let Some(r) = referenced.iter().position(Option::is_none) {
        return Err(err(format!("blobs[{r}]"), "record is not referenced"));
    }

    for (what, list, kind) in [("inputs", &m.inputs, BufferUse::Input), ("outputs", &m.outputs, BufferUse::Output)] {
        for (i, t) in list.iter().enumerate() {
            let path = format!("{what}[{i}]");
            if list[..i].iter().any(|o| o.name == t.name) {
                return Err(err(format!("{path}.name"), format!("duplicate name `{}`", t.name)));
            }
            let nbytes = t
                .shape
                .iter()
                .try_fold(t.dtype.size(), |acc, &d| acc.checked_mul(d))
                .ok_or_else(|| err(format!("{path}.shape"), "size overflows"))?;
            let b = m.buffers.get(t.buffer).ok_or_else(|| {
                err(format!("{path}.buffer"), format!("buffer {} out of range ({} buffers)", t.buffer, m.buffers.len()))
            })?;
            if b.kind != kind && !(kind == BufferUse::Input && b.kind == BufferUse::State) {
                return Err(err(
                    format!("{path}.buffer"),
                    format!("buffer {} is a {} buffer", t.buffer, kind_name(b.kind)),
                ));
            }
            if b.size != nbytes || b.dtype != t.dtype {
                return Err(err(
                    &path,
                    format!(
                        "{} {:?} needs {nbytes} bytes of {}, buffer {} has {} bytes of {}",
                        t.dtype, t.shape, t.dtype, t.buffer, b.size, b.dtype
                    ),
                ));
            }
            let elements = nbytes / t.dtype.size();
            for (name, start, end) in &t.slices {
                if start > end || *end > elements {
                    return Err(err(
                        format!("{path}.slices.{name}"),
                        format!("[{start}, {end}) outside {elements} elements"),
                    ));
                }
            }
        }
    }

    let arg_in_range = |path: &str, a: &Arg, len: u64| -> Result<(), SchemaError> {
        let b = m
            .buffers
            .get(a.buffer.0 as usize)
            .ok_or_else(|| err(path, format!("buffer {} out of range ({} buffers)", a.buffer.0, m.buffers.len())))?;
        match a.offset.checked_add(len) {
            Some(end) if end <= b.size as u64 => Ok(()),
            _ => Err(err(path, format!("range {}+{len} outside buffer {} of {} bytes", a.offset, a.buffer.0, b.size))),
        }
    };
    for (i, op) in m.step.iter().enumerate() {
        let path = format!("step[{i}]");
        match op {
            StepOp::Dispatch { program, args, global, local } => {
                let p = m.programs.get(program.0 as usize).ok_or_else(|| {
                    err(
                        format!("{path}.program"),
                        format!("program {} out of range ({} programs)", program.0, m.programs.len()),
                    )
                })?;
                if args.len() != p.args {
                    return Err(err(
                        format!("{path}.args"),
                        format!("{} arguments, program `{}` takes {}", args.len(), p.name, p.args),
                    ));
                }
                if global.contains(&0) {
                    return Err(err(format!("{path}.global"), "zero-sized dispatch"));
                }
                for (what, got, want) in [("global", global, &p.global), ("local", local, &p.local)] {
                    if got != want {
                        return Err(err(
                            format!("{path}.{what}"),
                            format!("{got:?}, but program `{}` was compiled for {want:?}", p.name),
                        ));
                    }
                }
                for (k, (a, param)) in args.iter().zip(&p.params).enumerate() {
                    let at = format!("{path}.args[{k}]");
                    arg_in_range(&at, a, 0)?;
                    check_argument(&at, &m.buffers[a.buffer.0 as usize], a, param, &p.name)?;
                }
            }
            StepOp::Copy { src, dst, len } => {
                arg_in_range(&format!("{path}.src"), src, *len)?;
                arg_in_range(&format!("{path}.dst"), dst, *len)?;
                if src.buffer == dst.buffer && src.offset < dst.offset + len && dst.offset < src.offset + len {
                    return Err(err(&path, "source and destination overlap"));
                }
                if m.buffers[src.buffer.0 as usize].image.is_some() || m.buffers[dst.buffer.0 as usize].image.is_some()
                {
                    return Err(err(&path, "images are not copied by byte range"));
                }
                if m.buffers[dst.buffer.0 as usize].kind == BufferUse::Weight {
                    return Err(err(format!("{path}.dst"), "copy into a weight buffer"));
                }
            }
        }
    }
    Ok(())
}

/// A dispatch argument against the kernel's parameter: no writes to weights or inputs; images where the
/// kernel takes an image (of its dimensions, bound whole) and plain buffers elsewhere; the element type
/// of the buffer (a byte arena holds any), an offset aligned to it, and the kernel's extent inside it.
fn check_argument(path: &str, b: &BufferSpec, a: &Arg, param: &ParamSpec, kernel: &str) -> Result<(), SchemaError> {
    let buffer = a.buffer.0;
    if param.writes && matches!(b.kind, BufferUse::Weight | BufferUse::Input) {
        return Err(err(path, format!("`{kernel}` writes here, buffer {buffer} is a {} buffer", kind_name(b.kind))));
    }
    let arena = b.kind == BufferUse::Scratch && b.dtype == DType::U8;
    if param.dtype != b.dtype && !arena {
        return Err(err(path, format!("`{kernel}` takes {} here, buffer {buffer} holds {}", param.dtype, b.dtype)));
    }
    match (param.kind, b.image) {
        (ParamKind::Buffer { bytes }, None) => {
            if !a.offset.is_multiple_of(param.dtype.size() as u64) {
                return Err(err(path, format!("offset {} is not aligned to {}", a.offset, param.dtype)));
            }
            match a.offset.checked_add(bytes) {
                Some(end) if end <= b.size as u64 => Ok(()),
                _ => Err(err(
                    path,
                    format!(
                        "`{kernel}` reaches {bytes} bytes from offset {}, past the end of buffer {buffer} ({} bytes)",
                        a.offset, b.size
                    ),
                )),
            }
        }
        (ParamKind::Buffer { .. }, Some(_)) => {
            Err(err(path, format!("`{kernel}` takes a plain buffer here, buffer {buffer} is an image")))
        }
        (ParamKind::Image { .. }, None) => {
            Err(err(path, format!("`{kernel}` takes an image here, buffer {buffer} is a plain buffer")))
        }
        (ParamKind::Image { width, height }, Some(im)) => {
            if a.offset != 0 {
                return Err(err(path, "an image is bound whole (offset must be 0)"));
            }
            if (im.width, im.height) != (width, height) {
                return Err(err(
                    path,
                    format!("`{kernel}` takes a {width}x{height} image, buffer {buffer} is {}x{}", im.width, im.height),
                ));
            }
            Ok(())
        }
    }
}

/// The most work-items one dispatch may have: the grids pilot's compilers make are far smaller, and the
/// devices count work-items and work-groups in 32 bits.
pub const MAX_GRID_ITEMS: u64 = u32::MAX as u64;
/// The most work-items one work-group may have (the Adreno 630, RDNA3 and RDNA4 all stop at 1024; CPU
/// programs use one). The devices check that a work-group divides the grid.
pub const MAX_GROUP_ITEMS: u64 = 1024;

/// A program's grid, counted in 64 bits: a product that wraps in 32 (to zero, or to a count that never ends)
/// is refused here, before any device multiplies it.
fn check_grid(path: &str, global: &[u32; 3], local: &[u32; 3]) -> Result<(), SchemaError> {
    let items = |g: &[u32; 3]| g.iter().map(|&x| u64::from(x)).try_fold(1u64, u64::checked_mul);
    // `local` all zeros leaves the work-group size to an OpenCL driver; a zero beside non-zeros means nothing.
    if global.contains(&0) || (local.contains(&0) && *local != [0; 3]) {
        return Err(err(format!("{path}.global"), format!("zero-sized grid {global:?} / {local:?}")));
    }
    match items(global) {
        Some(n) if n <= MAX_GRID_ITEMS => {}
        _ => return Err(err(format!("{path}.global"), format!("{global:?} is over {MAX_GRID_ITEMS} work-items"))),
    }
    match items(local) {
        Some(n) if n <= MAX_GROUP_ITEMS => Ok(()),
        _ => Err(err(format!("{path}.local"), format!("{local:?} is over {MAX_GROUP_ITEMS} work-items per group"))),
    }
}
