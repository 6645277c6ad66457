//! Texture sampling (`isam`, `sam`) and image access (`ldib.b`, `stib.b`) against the descriptors
//! the dispatch supplies (see `desc.rs`).

use half::f16;

use crate::decode::{Op, Type};
use crate::desc::{SampDesc, TexDesc};
use crate::exec::{stop, Exec, Flow, Stop, R};
use crate::exec_ops::Sync;
use crate::tex::Tex;

fn desc<'d, T>(list: &'d [T], i: usize, what: &str) -> R<&'d T> {
    list.get(i).ok_or_else(|| Stop(format!("{what} #{i} is not among the {} given", list.len())))
}

impl Exec<'_, '_> {
    pub(crate) fn tex(&mut self, t: &Tex) -> R<Flow> {
        // `isam.1d` is only the display of bit 18 clear (Mesa's INV_1D, set just for `isam.v`): what ir3 emits for
        // image loads (`emit_readonly_load_uav`/`emit_sam` in `ir3_compiler_nir.c`); the descriptor's type decides
        // the coordinates.
        if !matches!(t.name, "isam" | "sam") || t.is_3d || t.a || t.o || t.p || t.sv || t.src2_imm_offset {
            return stop(format!("{} with these modifiers is not implemented", self.instr));
        }
        let tex = TexDesc::decode(desc(self.g.textures, t.tex.unwrap_or(0) as usize, "texture")?).map_err(Stop)?;
        let samp = SampDesc::decode(desc(self.g.samplers, t.samp.unwrap_or(0) as usize, "sampler")?).map_err(Stop)?;
        let src = t.src1.ok_or_else(|| Stop("sampling without coordinates".into()))?;
        if t.half_src {
            return stop("half-precision coordinates are not implemented");
        }
        let x = self.read(src, false)?;
        let y = if tex.buffer { 0 } else { self.read(src + 1, false)? };
        let (x, y) = if t.name == "isam" {
            (x as i32 as i64, y as i32 as i64)
        } else {
            let scale = |c: u32, size: u32| {
                let v = f32::from_bits(c);
                (if samp.unnorm_coords { v } else { v * size as f32 }).floor() as i64
            };
            (scale(x, tex.width), scale(y, tex.height))
        };
        let texel = match (samp.wrap_index(0, x, tex.width), samp.wrap_index(1, y, tex.height.max(1))) {
            (Some(x), Some(y)) => {
                let mut b = vec![0u8; tex.format.bytes() as usize];
                self.mem.read(tex.texel_addr(x, y), &mut b).map_err(Stop)?;
                tex.swizzled(tex.format.unpack(&b))
            }
            _ => [0; 4],
        };
        let float_out = matches!(t.ty, Type::F32 | Type::F16);
        if float_out == tex.format.is_int() {
            return stop(format!("({}) result from a {:?} texture is not implemented", t.ty.name(), tex.format));
        }
        // Channel c lands in dst + c whether or not the channels before it are written (Mesa's `regmask_set` in
        // `ir3.h` walks a destination's wrmask that way, so ir3's legalizer and register allocator assume it).
        for (c, v) in texel.iter().enumerate() {
            if t.wrmask >> c & 1 == 0 {
                continue;
            }
            let reg = t.dst + c as u16;
            let v = match t.ty {
                Type::F16 => f16::from_f32(f32::from_bits(*v)).to_bits() as u32,
                Type::F32 | Type::U32 | Type::S32 => *v,
                _ => return stop(format!("({}) texture results are not implemented", t.ty.name())),
            };
            self.write(reg, t.ty.is_half(), v, Sync::Sy)?;
        }
        Ok(Flow::Next)
    }

    /// `ldib.b` / `stib.b`: `src1` holds the value, `src2` the coordinates. Typed access reads and
    /// writes texels of the descriptor's format; untyped access (SSBOs, on a buffer descriptor)
    /// reads `type_size` consecutive elements of the instruction's type from element `x`.
    pub(crate) fn ibo(&mut self) -> R<Flow> {
        let Op::Ibo { name, typed, d, ty, type_size, mode, bindless, src1, src2, offset, ssbo, .. } = &self.instr.op
        else {
            unreachable!()
        };
        if *mode != 0 || *bindless || *d > 2 || name.starts_with("atomic") || (!typed && *d != 1) {
            return stop(format!(
                "{} is not implemented (ldib.b/stib.b, typed 1D/2D or untyped 1D, with an immediate index are)",
                self.instr
            ));
        }
        let crate::decode::SrcKind::Imm(index) = ssbo.kind else { unreachable!() };
        let img = TexDesc::decode(desc(self.g.ibos, index as usize, "IBO")?).map_err(Stop)?;
        let x = self.read(*src2, false)?.wrapping_add(*offset);
        let y = if *d == 2 { self.read(*src2 + 1, false)? } else { 0 };
        let half = ty.is_half();
        if !typed {
            if !img.buffer {
                return stop("untyped image access on a descriptor that is not a buffer");
            }
            let n = *type_size as u64;
            if x as u64 + n > img.width as u64 {
                return stop(format!(
                    "buffer access to elements {x}..{} outside the {} given",
                    x as u64 + n,
                    img.width
                ));
            }
            let size = ty.bytes() as u64;
            for c in 0..n {
                let addr = img.base + (x as u64 + c) * size;
                if *name == "stib.b" {
                    let v = self.read(*src1 + c as u16, half)?;
                    self.mem.write(addr, &v.to_le_bytes()[..size as usize]).map_err(Stop)?;
                } else {
                    let mut b = [0u8; 4];
                    self.mem.read(addr, &mut b[..size as usize]).map_err(Stop)?;
                    self.write(*src1 + c as u16, half, u32::from_le_bytes(b), Sync::Sy)?;
                }
            }
            return Ok(Flow::Next);
        }
        if x >= img.width || y >= img.height.max(1) {
            return stop(format!("image access at ({x}, {y}) outside the {}x{} image", img.width, img.height));
        }
        let addr = img.texel_addr(x, y);
        let widen = |v: u32| if *ty == Type::F16 { f16::from_bits(v as u16).to_f32().to_bits() } else { v };
        if *name == "stib.b" {
            let mut v = [0u32; 4];
            for (c, slot) in v.iter_mut().enumerate().take(*type_size as usize) {
                *slot = widen(self.read(*src1 + c as u16, half)?);
            }
            self.mem.write(addr, &img.format.pack(v)).map_err(Stop)?;
        } else {
            let mut b = vec![0u8; img.format.bytes() as usize];
            self.mem.read(addr, &mut b).map_err(Stop)?;
            let v = img.format.unpack(&b);
            for (c, val) in v.iter().enumerate().take(*type_size as usize) {
                let val = if *ty == Type::F16 { f16::from_f32(f32::from_bits(*val)).to_bits() as u32 } else { *val };
                self.write(*src1 + c as u16, half, val, Sync::Sy)?;
            }
        }
        Ok(Flow::Next)
    }
}
