//! The per-instruction semantics of the executor (see `exec.rs` for the model).

use half::f16;

use crate::alu::{self, Domain};
use crate::decode::{Branch, Dst, GAddr, Op, Space, Src, SrcKind, Type};
use crate::exec::{stop, Exec, Flow, Loc, Stop, R};

/// `#flut` (ir3-common.xml).
const FLUT: [f32; 12] = [
    0.0,
    0.5,
    1.0,
    2.0,
    std::f32::consts::E,
    std::f32::consts::PI,
    std::f32::consts::FRAC_1_PI,
    std::f32::consts::LN_2,
    std::f32::consts::LOG2_E,
    std::f32::consts::LOG10_2,
    std::f32::consts::LOG2_10,
    4.0,
];

/// Which sync flag a result needs before it may be read.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sync {
    Now,
    Ss,
    Sy,
}

fn widen(v: u32, half: bool, dom: Domain) -> u32 {
    if !half {
        return v;
    }
    match dom {
        Domain::F => f16::from_bits(v as u16).to_f32().to_bits(),
        Domain::S => v as u16 as i16 as i32 as u32,
        Domain::U | Domain::B => v & 0xffff,
    }
}

fn narrow(v: u32, half: bool, dom: Domain) -> u32 {
    if !half {
        return v;
    }
    match dom {
        Domain::F => f16::from_f32(f32::from_bits(v)).to_bits() as u32,
        _ => v & 0xffff,
    }
}

impl Exec<'_, '_> {
    pub(crate) fn run(mut self) -> R<Flow> {
        let i = self.instr;
        match &i.op {
            Op::Flow0(name) => return self.flow0(name),
            Op::FlowImm(name, t) => return self.flow_imm(name, *t),
            Op::Branch { kind, inv1, comp1, inv2, comp2, target } => {
                let p = |inv: bool, c: u8, s: &Self| (s.f().p0[c as usize] != 0) != inv;
                let (a, b) = (p(*inv1, *comp1, &self), p(*inv2, *comp2, &self));
                let taken = match kind {
                    Branch::Br => a,
                    Branch::Brao => a || b,
                    Branch::Braa => a && b,
                    // Any/all over the wave's fibers, which run one after another here.
                    Branch::Bany | Branch::Ball => {
                        return stop(format!(
                            "{} needs the whole wave's predicates, which this model does not have",
                            self.instr
                        ))
                    }
                };
                return Ok(if taken { Flow::Jump(*target as i64) } else { Flow::Next });
            }
            Op::Kill { .. } => return stop("kill is not implemented (fragment shaders only)"),
            Op::Mov { src_type, dst_type, round, dst, src } => self.mov(*src_type, *dst_type, *round, *dst, src)?,
            Op::Multi { src_type, dst_type, round, dsts, srcs, .. } => {
                self.multi_mov(*src_type, *dst_type, *round, dsts, srcs)?
            }
            Op::Alu2 { name, opc, cond, dst, dst_half, src1, src2, .. } => {
                let dom = alu::domain2(*opc);
                for rep in 0..=i.repeat as u16 {
                    let a = self.src(src1, rep, dom)?;
                    let b = match src2 {
                        Some(s) => self.src(s, rep, dom)?,
                        None => 0,
                    };
                    // cmps.f/u/s produce 0 or 1, whatever their operands.
                    let out_dom = if matches!(opc, 5 | 20 | 21) { Domain::B } else { dom };
                    let v = if i.sat && out_dom != Domain::F {
                        alu::cat2_sat(*opc, a, b, src1.half)
                            .ok_or_else(|| Stop(format!("(sat){name} is not implemented")))?
                    } else {
                        let v = alu::cat2(*opc, *cond, a, b, src1.half)
                            .ok_or_else(|| Stop(format!("{name} is not implemented")))?;
                        self.saturate(v, out_dom)?
                    };
                    self.write(*dst + rep, *dst_half, narrow(v, *dst_half, out_dom), Sync::Now)?;
                }
            }
            Op::Alu3 { name, opc, alt, dst, dst_half, src, .. } => {
                let dom = alu::domain3(*alt, *opc);
                for rep in 0..=i.repeat as u16 {
                    let a = self.src(&src[0], rep, dom)?;
                    let b = self.src(&src[1], rep, dom)?;
                    let c = self.src(&src[2], rep, dom)?;
                    let v = alu::cat3(*alt, *opc, a, b, c, src[0].half)
                        .ok_or_else(|| Stop(format!("{name} is not implemented")))?;
                    let v = self.saturate(v, dom)?;
                    self.write(*dst + rep, *dst_half, narrow(v, *dst_half, dom), Sync::Now)?;
                }
            }
            Op::Sfu { name, opc, dst, dst_half, src, .. } => {
                for rep in 0..=i.repeat as u16 {
                    let a = self.src(src, rep, Domain::F)?;
                    let v = alu::cat4(*opc, a).ok_or_else(|| Stop(format!("{name} is not implemented")))?;
                    let v = self.saturate(v, Domain::F)?;
                    self.write(*dst + rep, *dst_half, narrow(v, *dst_half, Domain::F), Sync::Ss)?;
                }
            }
            Op::Ldg { ty, dst, base, addr, size } => {
                let a = self.global_addr(*base, addr)?;
                for k in 0..*size as u64 {
                    let v = self.load(a + k * ty.bytes() as u64, *ty)?;
                    self.write(*dst + k as u16, ty.is_half(), v, Sync::Sy)?;
                }
            }
            Op::Stg { ty, src, base, addr, size } => {
                let a = self.global_addr(*base, addr)?;
                for k in 0..*size as u64 {
                    let v = self.read(*src + k as u16, ty.is_half())?;
                    self.store(a + k * ty.bytes() as u64, *ty, v)?;
                }
            }
            Op::Ldl { space, ty, dst, src, off, size } => {
                let a = self.read(*src, false)? as i64 + *off as i64;
                // ir3_legalize: local loads need (ss), private ones (like all other loads) (sy).
                let sync = if *space == Space::P { Sync::Sy } else { Sync::Ss };
                for k in 0..*size as i64 {
                    let v = self.space_load(*space, a + k * ty.bytes() as i64, *ty)?;
                    self.write(*dst + k as u16, ty.is_half(), v, sync)?;
                }
            }
            Op::Stl { space, ty, dst, src, off, size } => {
                let a = self.read(*dst, false)? as i64 + *off as i64;
                for k in 0..*size as i64 {
                    let v = self.read(*src + k as u16, ty.is_half())?;
                    self.space_store(*space, a + k * ty.bytes() as i64, *ty, v)?;
                }
            }
            Op::AtomicL { name, ty, dst, src1, src2, type_size, .. } => {
                self.atomic_checks(*ty, *type_size)?;
                let a = self.read(*src1, false)? as i64;
                let v = self.read(*src2, false)?;
                let op = atomic_op(name, *ty)?;
                let old = self.local_load(a, Type::U32)?;
                self.local_store(a, Type::U32, op(old, v))?;
                self.write(*dst, false, old, Sync::Ss)?;
            }
            Op::AtomicG { name, ty, dst, src1, src2, type_size, .. } => {
                self.atomic_checks(*ty, *type_size)?;
                let a = self.addr64(*src1)?;
                let v = self.read(*src2, false)?;
                let op = atomic_op(name, *ty)?;
                let old = self.g_mem_atomic(a, &mut |o| op(o, v))?;
                self.write(*dst, false, old, Sync::Sy)?;
            }
            Op::Stc { ty, src, dst, a1, size } => {
                if !self.f().in_preamble {
                    return stop("stc outside the preamble is not implemented");
                }
                if ty.is_half() {
                    return stop("stc of a 16-bit type is not implemented");
                }
                // The destination counts 32-bit constants (ir3's `store_const_ir3` lowering sizes
                // constlen as `dst + components`), a1.x adding its high part.
                let base = *dst as usize + if *a1 { self.f().a1 as usize } else { 0 };
                for k in 0..*size as usize {
                    let v = self.read(*src + k as u16, false)?;
                    let c = base + k;
                    match self.g.consts.get_mut(c) {
                        Some(slot) => *slot = v,
                        None => return stop(format!("stc to c{}.{} beyond the constant file", c / 4, c % 4)),
                    }
                }
                let w = self.wave();
                self.g.const_written[w] = Some(self.pc as u32);
            }
            Op::Ibo { .. } => return self.ibo(),
            Op::Tex(t) => return self.tex(t),
            Op::Barrier { name, .. } => {
                // `fence` orders memory, which this model never reorders.
                if *name == "bar" {
                    return Ok(Flow::Barrier);
                }
            }
            Op::Cat7(text) => {
                if !text.starts_with("sleep") {
                    return stop(format!("{text} is not implemented"));
                }
            }
        }
        Ok(Flow::Next)
    }

    fn flow0(&mut self, name: &str) -> R<Flow> {
        Ok(match name {
            "nop" => Flow::Next,
            "end" => Flow::End,
            "shpe" => {
                let w = self.wave();
                self.g.preamble_done[w] = true;
                self.f_mut().in_preamble = false;
                Flow::Next
            }
            _ => return stop(format!("{name} is not implemented")),
        })
    }

    fn flow_imm(&mut self, name: &str, target: i32) -> R<Flow> {
        Ok(match name {
            "jump" => Flow::Jump(target as i64),
            // The wave's first fiber runs the preamble; the others skip it.
            "shps" => {
                if self.g.preamble_done[self.wave()] {
                    Flow::Jump(target as i64)
                } else {
                    self.f_mut().in_preamble = true;
                    Flow::Next
                }
            }
            "getone" if self.f().in_preamble => Flow::Next,
            _ => return stop(format!("{name} is not implemented (outside the preamble it needs a whole wave)")),
        })
    }

    fn wave(&self) -> usize {
        self.fiber / self.g.program.info().wave_size as usize
    }

    fn f(&self) -> &crate::exec::Fiber {
        &self.g.fibers[self.fiber]
    }

    fn f_mut(&mut self) -> &mut crate::exec::Fiber {
        &mut self.g.fibers[self.fiber]
    }

    fn saturate(&self, v: u32, dom: Domain) -> R<u32> {
        if !self.instr.sat {
            return Ok(v);
        }
        if dom != Domain::F {
            return stop("(sat) on an integer operation is not implemented");
        }
        Ok(f32::from_bits(v).clamp(0.0, 1.0).to_bits())
    }

    /// Where register `n` (`gpr * 4 + component`) lives; checks the declared footprint.
    fn locate(&self, n: u16, half: bool) -> R<Loc> {
        let gpr = n >> 2;
        match gpr {
            61 if !half && n & 3 == 0 => return Ok(Loc::A0),
            62 => return Ok(Loc::P0((n & 3) as usize)),
            48..=55 => {
                let s = (n as usize - 192) * if half { 1 } else { 2 };
                return Ok(Loc::Shared(s, if half { 1 } else { 2 }));
            }
            0..=47 => {}
            _ => return stop(format!("register {} is not implemented", reg_name(n, half))),
        }
        let vec4 = if half { n as i32 >> 3 } else { n as i32 >> 2 };
        let max = self.g.program.info().max_reg;
        if vec4 > max {
            return stop(format!("{} is above the program's register footprint (max_reg {max})", reg_name(n, half)));
        }
        Ok(if half { Loc::Private(n as usize, 1) } else { Loc::Private(2 * n as usize, 2) })
    }

    /// Faults when any slot of `loc` still waits for an (ss)/(sy) the instruction lacks.
    fn check_sync(&self, loc: Loc, n: u16, half: bool, what: &str) -> R<()> {
        let (base, len) = match loc {
            Loc::Private(s, l) => (s, l),
            Loc::Shared(s, l) => (crate::exec::PRIVATE_SLOTS + s, l),
            _ => return Ok(()),
        };
        let f = self.f();
        if f.ss.is_empty() && f.sy.is_empty() {
            return Ok(());
        }
        for s in base..base + len {
            if let Some(p) = f.ss.get(s) {
                return stop(format!(
                    "{what} {} before its value from instruction {p} (byte {:#x}, an SFU or local-memory result) is ready: (ss) missing",
                    reg_name(n, half),
                    p * 8
                ));
            }
            if let Some(p) = f.sy.get(s) {
                return stop(format!(
                    "{what} {} before its value from instruction {p} (byte {:#x}, a texture or global-memory result) is ready: (sy) missing",
                    reg_name(n, half),
                    p * 8
                ));
            }
        }
        Ok(())
    }

    /// Faults when an ALU instruction (cat1–cat3, which writes at once) overwrites `loc` while an
    /// in-flight instruction may not have read it yet. Writers that queue behind the reader (memory,
    /// texture, SFU) are not checked: Mesa's own hand-written programs rely on that order
    /// (computerator's `pvtmem.asm`: `stp` then `ldp` into its address register).
    fn check_war(&self, loc: Loc, n: u16, half: bool) -> R<()> {
        if !matches!(self.instr.op, Op::Mov { .. } | Op::Alu2 { .. } | Op::Alu3 { .. }) {
            return Ok(());
        }
        let (base, len) = match loc {
            Loc::Private(s, l) => (s, l),
            Loc::Shared(s, l) => (crate::exec::PRIVATE_SLOTS + s, l),
            _ => return Ok(()),
        };
        let f = self.f();
        if f.war_ss.is_empty() && f.war_any.is_empty() {
            return Ok(());
        }
        for s in base..base + len {
            let (p, flags) = match (f.war_ss.get(s), f.war_any.get(s)) {
                (Some(p), _) => (p, "(ss)"),
                (None, Some(p)) => (p, "(ss) or (sy)"),
                (None, None) => continue,
            };
            return stop(format!(
                "overwrites {} which instruction {p} (byte {:#x}) may still be reading: {flags} missing",
                reg_name(n, half),
                p * 8
            ));
        }
        Ok(())
    }

    /// Reads register `n`: 16 bits (zero-extended) for a half register, else 32.
    pub(crate) fn read(&self, n: u16, half: bool) -> R<u32> {
        let loc = self.locate(n, half)?;
        self.check_sync(loc, n, half, "reads")?;
        if let Some(reads) = self.reads {
            match loc {
                Loc::Private(s, l) => reads.borrow_mut().extend(s..s + l),
                Loc::Shared(s, l) => {
                    reads.borrow_mut().extend(crate::exec::PRIVATE_SLOTS + s..crate::exec::PRIVATE_SLOTS + s + l)
                }
                _ => {}
            }
        }
        let f = self.f();
        let slots = |file: &[u16], s: usize, l: usize| {
            if l == 1 {
                file[s] as u32
            } else {
                file[s] as u32 | (file[s + 1] as u32) << 16
            }
        };
        Ok(match loc {
            Loc::Private(s, l) => slots(&f.regs, s, l),
            Loc::Shared(s, l) => slots(&self.g.shared[self.wave()], s, l),
            Loc::A0 => f.a0 as i32 as u32,
            Loc::P0(c) => f.p0[c],
        })
    }

    /// Writes register `n`; `sync` says which flag a later reader needs.
    pub(crate) fn write(&mut self, n: u16, half: bool, v: u32, sync: Sync) -> R<()> {
        let loc = self.locate(n, half)?;
        self.check_sync(loc, n, half, "writes")?;
        self.check_war(loc, n, half)?;
        let (pc, wave) = (self.pc, self.wave());
        let mark = |f: &mut crate::exec::Fiber, base: usize, l: usize| {
            for s in base..base + l {
                match sync {
                    Sync::Now => {}
                    Sync::Ss => f.ss.mark(s, pc),
                    Sync::Sy => f.sy.mark(s, pc),
                }
            }
        };
        match loc {
            Loc::Private(s, l) => {
                let f = &mut self.g.fibers[self.fiber];
                f.regs[s] = v as u16;
                if l == 2 {
                    f.regs[s + 1] = (v >> 16) as u16;
                }
                mark(f, s, l);
            }
            Loc::Shared(s, l) => {
                let file = &mut self.g.shared[wave];
                file[s] = v as u16;
                if l == 2 {
                    file[s + 1] = (v >> 16) as u16;
                }
                mark(&mut self.g.fibers[self.fiber], crate::exec::PRIVATE_SLOTS + s, l);
            }
            Loc::A0 => self.f_mut().a0 = v as i16,
            Loc::P0(c) => self.f_mut().p0[c] = v,
        }
        Ok(())
    }

    fn konst(&self, c: i64, half: bool) -> R<u32> {
        // Constants written by `stc` are visible only after an (ss) (ir3_legalize's `needs_ss_for_const`).
        if let Some(p) = self.g.const_written[self.wave()] {
            return stop(format!(
                "reads a constant before the stc at instruction {p} (byte {:#x}) is visible: (ss) missing",
                p * 8
            ));
        }
        match usize::try_from(c).ok().and_then(|c| self.g.consts.get(c)) {
            // A half constant reads the low 16 bits of its 32-bit slot.
            Some(v) => Ok(if half { v & 0xffff } else { *v }),
            None => stop(format!(
                "reads c{}.{} beyond the {} constants given",
                c / 4,
                ['x', 'y', 'z', 'w'][c.rem_euclid(4) as usize],
                self.g.consts.len()
            )),
        }
    }

    /// A source operand for repetition `rep`, widened into `dom` with its modifiers applied.
    fn src(&self, s: &Src, rep: u16, dom: Domain) -> R<u32> {
        let adv = if s.r { rep } else { 0 };
        let raw = match s.kind {
            SrcKind::Gpr(n) => widen(self.read(n + adv, s.half)?, s.half, dom),
            SrcKind::Const(n) => widen(self.konst(n as i64 + adv as i64, s.half)?, s.half, dom),
            SrcKind::RelGpr(o) => {
                let n = self.f().a0 as i64 + o as i64 + adv as i64;
                let n = u16::try_from(n).map_err(|_| Stop(format!("r<a0.x + {o}> is register {n}")))?;
                widen(self.read(n, s.half)?, s.half, dom)
            }
            SrcKind::RelConst(o) => {
                let c = self.f().a0 as i64 + o as i64 + adv as i64;
                widen(self.konst(c, s.half)?, s.half, dom)
            }
            SrcKind::Imm(v) if dom != Domain::F => {
                widen(v as u32 & if s.half { 0xffff } else { u32::MAX }, s.half, dom)
            }
            SrcKind::Imm(_) => return stop("an integer immediate in a float operation is not implemented"),
            SrcKind::Flut(k) if dom == Domain::F => {
                let x = *FLUT.get(k as usize).ok_or_else(|| Stop(format!("float table entry {k} does not exist")))?;
                if s.half {
                    f16::from_f32(x).to_f32().to_bits()
                } else {
                    x.to_bits()
                }
            }
            SrcKind::Flut(_) => return stop("a float-table immediate in an integer operation is not implemented"),
            SrcKind::Raw(v) => v,
        };
        Ok(match dom {
            Domain::F => {
                let mut v = raw;
                if s.abs {
                    v &= 0x7fff_ffff;
                }
                if s.neg {
                    v ^= 0x8000_0000;
                }
                v
            }
            Domain::S | Domain::U => {
                let mut v = raw as i32;
                if s.abs {
                    v = v.wrapping_abs();
                }
                if s.neg {
                    v = v.wrapping_neg();
                }
                v as u32
            }
            Domain::B => {
                if s.abs {
                    return stop("(abs) on a bitwise operand is not implemented");
                }
                if s.neg {
                    !raw
                } else {
                    raw
                }
            }
        })
    }

    fn mov(&mut self, st: Type, dt: Type, round: u8, dst: Dst, src: &Src) -> R<()> {
        for rep in 0..=self.instr.repeat as u16 {
            let raw = self.src(src, rep, Domain::B)?;
            let v = convert_rounded(raw, st, dt, round).ok_or_else(|| {
                Stop(format!("cov.{}{} with rounding {round} is not implemented", st.name(), dt.name()))
            })?;
            match dst {
                Dst::Gpr(0xf4) if st == Type::S16 && dt == Type::S16 => self.f_mut().a0 = v as i16,
                Dst::Gpr(0xf5) if st == Type::U16 && dt == Type::U16 => self.f_mut().a1 = v as u16,
                Dst::Gpr(n) => self.write(n + rep, dt.is_half(), v, Sync::Now)?,
                Dst::RelGpr(o) => {
                    let n = self.f().a0 as i64 + o as i64 + rep as i64;
                    let n = u16::try_from(n).map_err(|_| Stop(format!("r<a0.x + {o}> is register {n}")))?;
                    self.write(n, dt.is_half(), v, Sync::Now)?
                }
            }
        }
        Ok(())
    }

    /// `swz`/`gat`/`sct`: every source is read (and converted) before any destination is written.
    fn multi_mov(&mut self, st: Type, dt: Type, round: u8, dsts: &[u16], srcs: &[u16]) -> R<()> {
        let half = |t: Type| t.is_half() || t == Type::U8x32;
        let mut values = Vec::with_capacity(srcs.len());
        for &n in srcs {
            let raw = self.read(n, half(st))?;
            values.push(convert_rounded(raw, st, dt, round).ok_or_else(|| {
                Stop(format!("{}.{}{} is not implemented", self.instr.mnemonic(), st.name(), dt.name()))
            })?);
        }
        for (&n, v) in dsts.iter().zip(values) {
            self.write(n, half(dt), v, Sync::Now)?;
        }
        Ok(())
    }

    fn addr64(&self, n: u16) -> R<u64> {
        Ok(self.read(n, false)? as u64 | (self.read(n + 1, false)? as u64) << 32)
    }

    fn global_addr(&self, base: u16, addr: &GAddr) -> R<u64> {
        let b = self.addr64(base)?;
        Ok(match *addr {
            GAddr::Imm(off) => b.wrapping_add(off as i64 as u64),
            GAddr::Indexed { idx, off, dword_shift } => {
                let i = self.read(idx, false)? as u64;
                b.wrapping_add(i << (dword_shift + 2)).wrapping_add((off as u64) << 2)
            }
        })
    }

    fn load(&self, a: u64, ty: Type) -> R<u32> {
        let mut buf = [0u8; 4];
        let n = ty.bytes() as usize;
        self.mem.read(a, &mut buf[..n]).map_err(Stop)?;
        Ok(u32::from_le_bytes(buf))
    }

    fn store(&self, a: u64, ty: Type, v: u32) -> R<()> {
        self.mem.write(a, &v.to_le_bytes()[..ty.bytes() as usize]).map_err(Stop)
    }

    fn g_mem_atomic(&self, a: u64, f: &mut dyn FnMut(u32) -> u32) -> R<u32> {
        self.mem.atomic32(a, f).map_err(Stop)
    }

    fn local_range(&self, a: i64, n: usize) -> R<usize> {
        match usize::try_from(a) {
            Ok(s) if s + n <= self.g.local.len() => Ok(s),
            _ => {
                stop(format!("local memory access of {n} bytes at {a} outside the {} bytes given", self.g.local.len()))
            }
        }
    }

    fn space_load(&self, space: Space, a: i64, ty: Type) -> R<u32> {
        if space != Space::P {
            return self.local_load(a, ty);
        }
        let n = ty.bytes() as usize;
        let p = &self.f().private;
        match usize::try_from(a) {
            Ok(s) if s + n <= p.len() => {
                let mut buf = [0u8; 4];
                buf[..n].copy_from_slice(&p[s..s + n]);
                Ok(u32::from_le_bytes(buf))
            }
            _ => {
                stop(format!("private memory access of {n} bytes at {a} outside the {} bytes per fiber given", p.len()))
            }
        }
    }

    fn space_store(&mut self, space: Space, a: i64, ty: Type, v: u32) -> R<()> {
        if space != Space::P {
            return self.local_store(a, ty, v);
        }
        let n = ty.bytes() as usize;
        let p = &mut self.f_mut().private;
        match usize::try_from(a) {
            Ok(s) if s + n <= p.len() => {
                p[s..s + n].copy_from_slice(&v.to_le_bytes()[..n]);
                Ok(())
            }
            _ => {
                stop(format!("private memory access of {n} bytes at {a} outside the {} bytes per fiber given", p.len()))
            }
        }
    }

    fn local_load(&self, a: i64, ty: Type) -> R<u32> {
        let n = ty.bytes() as usize;
        let s = self.local_range(a, n)?;
        let mut buf = [0u8; 4];
        buf[..n].copy_from_slice(&self.g.local[s..s + n]);
        Ok(u32::from_le_bytes(buf))
    }

    fn local_store(&mut self, a: i64, ty: Type, v: u32) -> R<()> {
        let n = ty.bytes() as usize;
        let s = self.local_range(a, n)?;
        self.g.local[s..s + n].copy_from_slice(&v.to_le_bytes()[..n]);
        Ok(())
    }

    fn atomic_checks(&self, ty: Type, type_size: u8) -> R<()> {
        if !matches!(ty, Type::U32 | Type::S32) || type_size != 1 {
            return stop(format!("atomics on {}x{type_size} are not implemented", ty.name()));
        }
        Ok(())
    }
}

fn reg_name(n: u16, half: bool) -> String {
    format!("{}r{}.{}", if half { "h" } else { "" }, n >> 2, ['x', 'y', 'z', 'w'][(n & 3) as usize])
}

type AtomicFn = fn(u32, u32) -> u32;

/// The 32-bit atomic operations (returning the new value from old and operand).
fn atomic_op(name: &str, ty: Type) -> R<AtomicFn> {
    let signed = ty == Type::S32;
    Ok(match name.rsplit('.').next().unwrap() {
        "add" => |o, v| o.wrapping_add(v),
        "sub" => |o, v| o.wrapping_sub(v),
        "xchg" => |_, v| v,
        "and" => |o, v| o & v,
        "or" => |o, v| o | v,
        "xor" => |o, v| o ^ v,
        "min" if signed => |o, v| (o as i32).min(v as i32) as u32,
        "max" if signed => |o, v| (o as i32).max(v as i32) as u32,
        "min" => |o: u32, v: u32| o.min(v),
        "max" => |o: u32, v: u32| o.max(v),
        _ => return stop(format!("{name} is not implemented")),
    })
}

enum Num {
    F(f32),
    I(i64),
}

/// `mov`/`cov` from `st` to `dt` of a source already read (16 bits for half types).
/// `convert` under cat1's `#round` field (ir3-cat1.xml; Mesa's `round_t`: 0 ROUND_ZERO, 1 ROUND_EVEN, 2 ROUND_POS_INF,
/// 3 ROUND_NEG_INF). ir3 sets ROUND_EVEN on `cov` to a float for `f2f16_rtne` (`ir3_compiler_nir.c` `create_cov`),
/// executed as the round-to-nearest-even the default already gives here; to an integer from a float the value is
/// rounded that way before the conversion truncates. Directed rounding to a float is not implemented (`None`).
fn convert_rounded(raw: u32, st: Type, dt: Type, round: u8) -> Option<u32> {
    let float = |t: Type| matches!(t, Type::F16 | Type::F32);
    match round {
        0 => convert(raw, st, dt),
        1 if float(dt) => convert(raw, st, dt),
        _ if float(dt) => None,
        _ if !float(st) => convert(raw, st, dt),
        _ => {
            let v = if st == Type::F16 { f16::from_bits(raw as u16).to_f32() } else { f32::from_bits(raw) };
            let r = match round {
                1 => v.round_ties_even(),
                2 => v.ceil(),
                _ => v.floor(),
            };
            convert(r.to_bits(), Type::F32, dt)
        }
    }
}

fn convert(raw: u32, st: Type, dt: Type) -> Option<u32> {
    if st == dt {
        return Some(raw);
    }
    let x = match st {
        Type::F16 => Num::F(f16::from_bits(raw as u16).to_f32()),
        Type::F32 => Num::F(f32::from_bits(raw)),
        Type::U16 => Num::I((raw & 0xffff) as i64),
        Type::S16 => Num::I(raw as u16 as i16 as i64),
        Type::U32 => Num::I(raw as i64),
        Type::S32 => Num::I(raw as i32 as i64),
        // The hardware sign-extends an 8-bit `cov` source and cannot convert one to float directly (Mesa
        // ir3_compiler_nir.c `create_cov`: "Zero-extension of 8-bit values doesn't work with `cov`", so Mesa masks
        // with `and.b` instead, and i2f of 8 bits goes through `cov.u8s16`).
        Type::U8 | Type::U8x32 if matches!(dt, Type::F16 | Type::F32) => return None,
        Type::U8 | Type::U8x32 => Num::I(raw as u8 as i8 as i64),
    };
    Some(match (x, dt) {
        (Num::F(v), Type::F16) => f16::from_f32(v).to_bits() as u32,
        (Num::F(v), Type::F32) => v.to_bits(),
        (Num::I(v), Type::F16) => f16::from_f32(v as f32).to_bits() as u32,
        (Num::I(v), Type::F32) => (v as f32).to_bits(),
        (Num::F(v), Type::U32) => v as u32,
        (Num::F(v), Type::S32) => v as i32 as u32,
        (Num::F(v), Type::U16) => v as u16 as u32,
        (Num::F(v), Type::S16) => v as i16 as u16 as u32,
        (Num::F(_), _) => return None,
        (Num::I(v), Type::U32 | Type::S32) => v as u32,
        (Num::I(v), Type::U16 | Type::S16) => v as u16 as u32,
        (Num::I(v), Type::U8 | Type::U8x32) => v as u8 as u32,
    })
}

/// Whether `i` reads its sources after it issues (ir3's `is_war_hazard_producer`: texture, memory,
/// SFU and `stc`), and if so whether overwriting them needs (ss) (`Some(true)`: (ss) producers,
/// stores, `stc`) or either flag (`Some(false)`), as `ir3_legalize.c` tracks them.
pub(crate) fn war_kind(i: &crate::Instr) -> Option<bool> {
    Some(match &i.op {
        Op::Sfu { .. } | Op::Stl { .. } | Op::Stg { .. } | Op::Stc { .. } => true,
        Op::Ldl { space, .. } => *space != Space::P,
        Op::Ibo { name, .. } => *name == "stib.b",
        Op::Ldg { .. } | Op::AtomicL { .. } | Op::AtomicG { .. } | Op::Tex(_) => false,
        _ => return None,
    })
}

/// Mnemonics (as [`crate::Instr::mnemonic`] names them) the executor implements: the ALU and
/// atomic tables probed, plus the flow, move and memory operations handled above.
pub fn implemented_mnemonics() -> Vec<String> {
    let mut v: Vec<String> = [
        "nop", "end", "jump", "shps", "shpe", "getone", "br", "brao", "braa", "mov", "cov", "mova", "mova1", "swz",
        "gat", "sct", "ldg", "ldg.a", "stg", "stg.a", "ldl", "ldlw", "ldp", "stl", "stlw", "stp", "stc", "bar",
        "fence", "sleep", "isam", "sam", "ldib.b", "stib.b",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(
        crate::decode::CAT2
            .iter()
            .filter(|e| alu::cat2(e.0, Some(crate::Cond::Lt), 1, 2, false).is_some())
            .map(|e| e.1.to_string()),
    );
    v.extend(
        crate::decode::cat3_table().filter(|e| alu::cat3(e.0, e.1, 1, 2, 3, false).is_some()).map(|e| e.2.to_string()),
    );
    v.extend(crate::decode::CAT4.iter().filter(|e| alu::cat4(e.0, 1).is_some()).map(|e| e.1.to_string()));
    v.extend(
        crate::cat6_names()
            .into_iter()
            .filter(|n| n.starts_with("atomic.") && !n.starts_with("atomic.b.") && atomic_op(n, Type::U32).is_ok()),
    );
    v
}
