//! What dispatching an `ir3` program (Adreno 630 machine code from Mesa's ir3) needs, as the compiler
//! read it from the compiled variant and recorded it under the program's `"ir3"` key:
//!
//! ```text
//! "ir3": {"instrlen": n, "regs": (full, half), "constlen": vec4s, "params": (offset, size) | None,
//!         "driver_params": (offset, size) | None, "immediates": (offset, [u32..]), "branchstack": n,
//!         "private_memory": bytes, "local_memory": bytes, "textures": n, "ibos": n,
//!         "tex_to_image": [..], "sysval_regs": (work_group_id, local_id), "double_threadsize": bool,
//!         "args": [("param", byte offset) | ("texture", i) | ("ibo", i) ..]}
//! ```
//! Const-file offsets and sizes are in vec4 (16 bytes). Present exactly on `ir3` programs.

use super::pickle::Value;
use super::schema::{err, SchemaError};

/// Where a program argument is bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ir3Arg {
    /// The buffer's 64-bit address at this byte offset of the kernel parameters.
    Param(u32),
    /// A read image: texture state `i` (an `isam`).
    Texture(u32),
    /// The written image: IBO state `i`.
    Ibo(u32),
}

/// One ir3 program's dispatch facts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ir3Program {
    /// Instruction length in units of 16 instructions (128 bytes), as the variant reports it.
    pub instrlen: u32,
    /// Register footprint: full and half registers (vec4 units) the program uses.
    pub full_regs: u32,
    pub half_regs: u32,
    /// Const file length the program reads (vec4).
    pub constlen: u32,
    /// Where the kernel parameters sit in the const file: (offset, size), vec4; None without buffers.
    pub params: Option<(u32, u32)>,
    /// Driver parameters (work-group size, ...) in the const file: (offset, size), vec4.
    pub driver_params: Option<(u32, u32)>,
    /// Where the immediates go in the const file (vec4) and their values.
    pub immediates_offset: u32,
    pub immediates: Vec<u32>,
    pub branchstack: u32,
    /// Private memory bytes per fiber and local (shared) memory bytes per work-group.
    pub private_memory: u32,
    pub local_memory: u32,
    pub textures: u32,
    pub ibos: u32,
    /// The image each texture state serves, in texture order.
    pub tex_to_image: Vec<u32>,
    /// Register ids (ir3's encoding; 0xfc: unused) of the work-group id and local id system values.
    pub work_group_id_reg: u32,
    pub local_id_reg: u32,
    pub double_threadsize: bool,
    pub args: Vec<Ir3Arg>,
}

/// a6xx limits the checks hold programs to.
pub const MAX_FULL_REGS: u32 = 64;
pub const MAX_CONSTLEN: u32 = 1024;
pub const MAX_LOCAL_MEMORY: u32 = 32 << 10;

impl Ir3Program {
    pub(crate) fn encode(&self) -> Value {
        let int = |x: u32| Value::Int(i64::from(x));
        let pair = |(a, b): (u32, u32)| Value::Tuple(vec![int(a), int(b)]);
        let opt = |p: Option<(u32, u32)>| p.map_or(Value::None, pair);
        let list = |xs: &[u32]| Value::List(xs.iter().map(|&x| int(x)).collect());
        let args = self
            .args
            .iter()
            .map(|a| {
                let (k, v) = match *a {
                    Ir3Arg::Param(o) => ("param", o),
                    Ir3Arg::Texture(i) => ("texture", i),
                    Ir3Arg::Ibo(i) => ("ibo", i),
                };
                Value::Tuple(vec![Value::str(k), int(v)])
            })
            .collect();
        let entries = vec![
            ("instrlen", int(self.instrlen)),
            ("regs", pair((self.full_regs, self.half_regs))),
            ("constlen", int(self.constlen)),
            ("params", opt(self.params)),
            ("driver_params", opt(self.driver_params)),
            ("immediates", Value::Tuple(vec![int(self.immediates_offset), list(&self.immediates)])),
            ("branchstack", int(self.branchstack)),
            ("private_memory", int(self.private_memory)),
            ("local_memory", int(self.local_memory)),
            ("textures", int(self.textures)),
            ("ibos", int(self.ibos)),
            ("tex_to_image", list(&self.tex_to_image)),
            ("sysval_regs", pair((self.work_group_id_reg, self.local_id_reg))),
            ("double_threadsize", Value::Bool(self.double_threadsize)),
            ("args", Value::List(args)),
        ];
        Value::Dict(entries.into_iter().map(|(k, v)| (Value::str(k), v)).collect())
    }

    pub(crate) fn decode(path: &str, v: &Value) -> Result<Ir3Program, SchemaError> {
        let Value::Dict(entries) = v else { return Err(err(path, format!("expected dict, found {}", v.type_name()))) };
        const KNOWN: &[&str] = &[
            "instrlen",
            "regs",
            "constlen",
            "params",
            "driver_params",
            "immediates",
            "branchstack",
            "private_memory",
            "local_memory",
            "textures",
            "ibos",
            "tex_to_image",
            "sysval_regs",
            "double_threadsize",
            "args",
        ];
        super::schema::check_keys(path, entries, KNOWN)?;
        let get = |key: &str| {
            entries
                .iter()
                .find(|(k, _)| matches!(k, Value::Str(s) if s == key))
                .map(|(_, v)| v)
                .ok_or_else(|| err(format!("{path}.{key}"), "missing"))
        };
        let u32_of = |p: &str, v: &Value| match v {
            Value::Int(i) if (0..=i64::from(u32::MAX)).contains(i) => Ok(*i as u32),
            other => Err(err(p, format!("expected a u32, found {other:?}"))),
        };
        let items = |p: &str, v: &'_ Value| -> Result<Vec<Value>, SchemaError> {
            match v {
                Value::List(xs) | Value::Tuple(xs) => Ok(xs.clone()),
                other => Err(err(p, format!("expected list, found {}", other.type_name()))),
            }
        };
        let u32_list = |p: &str, v: &Value| -> Result<Vec<u32>, SchemaError> {
            items(p, v)?.iter().enumerate().map(|(i, x)| u32_of(&format!("{p}[{i}]"), x)).collect()
        };
        let pair = |key: &str, v: &Value| -> Result<(u32, u32), SchemaError> {
            let p = format!("{path}.{key}");
            match u32_list(&p, v)?.as_slice() {
                &[a, b] => Ok((a, b)),
                _ => Err(err(p, "expected a pair")),
            }
        };
        let field = |key: &str| u32_of(&format!("{path}.{key}"), get(key)?);
        let opt_pair = |key: &str| match get(key)? {
            Value::None => Ok(None),
            v => pair(key, v).map(Some),
        };
        let (full_regs, half_regs) = pair("regs", get("regs")?)?;
        let (work_group_id_reg, local_id_reg) = pair("sysval_regs", get("sysval_regs")?)?;
        let imm = items(&format!("{path}.immediates"), get("immediates")?)?;
        let [imm_offset, imm_values] = imm.as_slice() else {
            return Err(err(format!("{path}.immediates"), "expected (offset, [values])"));
        };
        let args = items(&format!("{path}.args"), get("args")?)?
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let p = format!("{path}.args[{i}]");
                match items(&p, a)?.as_slice() {
                    [Value::Str(k), v] => {
                        let x = u32_of(&p, v)?;
                        match k.as_str() {
                            "param" => Ok(Ir3Arg::Param(x)),
                            "texture" => Ok(Ir3Arg::Texture(x)),
                            "ibo" => Ok(Ir3Arg::Ibo(x)),
                            other => Err(err(p, format!("unknown binding `{other}`"))),
                        }
                    }
                    _ => Err(err(p, "expected (kind, index)")),
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Ir3Program {
            instrlen: field("instrlen")?,
            full_regs,
            half_regs,
            constlen: field("constlen")?,
            params: opt_pair("params")?,
            driver_params: opt_pair("driver_params")?,
            immediates_offset: u32_of(&format!("{path}.immediates[0]"), imm_offset)?,
            immediates: u32_list(&format!("{path}.immediates[1]"), imm_values)?,
            branchstack: field("branchstack")?,
            private_memory: field("private_memory")?,
            local_memory: field("local_memory")?,
            textures: field("textures")?,
            ibos: field("ibos")?,
            tex_to_image: u32_list(&format!("{path}.tex_to_image"), get("tex_to_image")?)?,
            work_group_id_reg,
            local_id_reg,
            double_threadsize: match get("double_threadsize")? {
                Value::Bool(b) => *b,
                other => {
                    return Err(err(
                        format!("{path}.double_threadsize"),
                        format!("expected bool, found {}", other.type_name()),
                    ))
                }
            },
            args,
        })
    }

    /// The meaning checks for a program of `args` arguments whose code is `code_bytes` long: the
    /// code padded as ir3 pads it (at least 4 trailing nops, then to 128 bytes: one 128-byte group
    /// more than `instrlen` at most), registers and consts within the a6xx's, one texture or IBO
    /// per image argument.
    pub(crate) fn check(&self, path: &str, args: usize, code_bytes: u64) -> Result<(), SchemaError> {
        let len = u64::from(self.instrlen) * 128;
        if self.instrlen == 0 || !code_bytes.is_multiple_of(128) || code_bytes < len || code_bytes > len + 128 {
            return Err(err(
                format!("{path}.instrlen"),
                format!("{code_bytes} bytes of code do not fit an instruction length of {} × 128", self.instrlen),
            ));
        }
        if self.full_regs > MAX_FULL_REGS || self.half_regs > MAX_FULL_REGS {
            return Err(err(format!("{path}.regs"), format!("more than {MAX_FULL_REGS} vec4 registers")));
        }
        if self.constlen > MAX_CONSTLEN {
            return Err(err(format!("{path}.constlen"), format!("{} exceeds {MAX_CONSTLEN}", self.constlen)));
        }
        if self.local_memory > MAX_LOCAL_MEMORY {
            return Err(err(
                format!("{path}.local_memory"),
                format!("{} exceeds {MAX_LOCAL_MEMORY}", self.local_memory),
            ));
        }
        if let Some((off, size)) = self.params.filter(|&(off, size)| off + size > self.constlen) {
            return Err(err(
                format!("{path}.params"),
                format!("vec4 {off}..{} passes the {}-vec4 const file", off + size, self.constlen),
            ));
        }
        // The const file's regions the driver writes: kernel parameters, driver parameters, immediates.
        let imm = (self.immediates_offset, (self.immediates.len() as u32).div_ceil(4));
        let regions = [("params", self.params), ("driver_params", self.driver_params), ("immediates", Some(imm))];
        for (i, (a, ra)) in regions.iter().enumerate() {
            for (b, rb) in &regions[i + 1..] {
                if let (Some((a0, an)), Some((b0, bn))) = (ra, rb) {
                    if *an > 0 && *bn > 0 && a0 < &(b0 + bn) && b0 < &(a0 + an) {
                        return Err(err(
                            path,
                            format!("{a} (vec4 {a0}..{}) and {b} (vec4 {b0}..{}) overlap", a0 + an, b0 + bn),
                        ));
                    }
                }
            }
        }
        if self.args.len() != args {
            return Err(err(format!("{path}.args"), format!("{} bindings for {args} arguments", self.args.len())));
        }
        let (mut tex, mut ibo) = (0, 0);
        for (i, a) in self.args.iter().enumerate() {
            match *a {
                Ir3Arg::Param(o) if !o.is_multiple_of(8) => {
                    return Err(err(format!("{path}.args[{i}]"), format!("parameter offset {o} is unaligned")));
                }
                Ir3Arg::Param(_) => {}
                // A read image may have no texture state: ir3 drops reads whose values are unused.
                Ir3Arg::Texture(_) => tex += 1,
                Ir3Arg::Ibo(_) => ibo += 1,
            }
        }
        if self.textures > tex || self.ibos > ibo || self.tex_to_image.len() != self.textures as usize {
            return Err(err(
                path,
                format!(
                    "{} textures and {} IBOs (tex_to_image of {}) for {tex} read and {ibo} written images",
                    self.textures,
                    self.ibos,
                    self.tex_to_image.len()
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Ir3Program {
        Ir3Program {
            instrlen: 9,
            full_regs: 12,
            half_regs: 0,
            constlen: 12,
            params: Some((4, 4)),
            driver_params: None,
            immediates_offset: 8,
            immediates: vec![1, 2, 3, 4, 5],
            branchstack: 1,
            private_memory: 0,
            local_memory: 0,
            textures: 1,
            ibos: 0,
            tex_to_image: vec![0],
            work_group_id_reg: 192,
            local_id_reg: 0,
            double_threadsize: false,
            args: vec![Ir3Arg::Param(0), Ir3Arg::Texture(0), Ir3Arg::Param(8)],
        }
    }

    #[test]
    fn round_trips_and_checks() {
        let r = sample();
        assert_eq!(Ir3Program::decode("p", &r.encode()).unwrap(), r);
        r.check("p", 3, 1152).unwrap();
        let e = |r: &Ir3Program, args, bytes| r.check("p", args, bytes).unwrap_err().to_string();
        assert_eq!(e(&r, 2, 1152), "p.args: 3 bindings for 2 arguments");
        assert_eq!(e(&r, 3, 1024), "p.instrlen: 1024 bytes of code do not fit an instruction length of 9 × 128");
        assert_eq!(e(&r, 3, 1408), "p.instrlen: 1408 bytes of code do not fit an instruction length of 9 × 128");
        let shifted = Ir3Program { params: Some((5, 4)), ..r.clone() };
        assert_eq!(e(&shifted, 3, 1152), "p: params (vec4 5..9) and immediates (vec4 8..10) overlap");
        let past = Ir3Program { params: Some((10, 4)), immediates_offset: 4, ..r.clone() };
        assert_eq!(e(&past, 3, 1152), "p.params: vec4 10..14 passes the 12-vec4 const file");
        let regs = Ir3Program { full_regs: 65, ..r.clone() };
        assert_eq!(e(&regs, 3, 1152), "p.regs: more than 64 vec4 registers");
        let no_tex = Ir3Program { textures: 0, tex_to_image: vec![], ..r.clone() };
        no_tex.check("p", 3, 1152).unwrap();
        let extra = Ir3Program { textures: 2, tex_to_image: vec![0, 1], ..r.clone() };
        assert_eq!(e(&extra, 3, 1152), "p: 2 textures and 0 IBOs (tex_to_image of 2) for 1 read and 0 written images");
        let Value::Dict(mut entries) = r.encode() else { unreachable!() };
        entries.retain(|(k, _)| *k != Value::str("regs"));
        assert_eq!(Ir3Program::decode("p", &Value::Dict(entries)).unwrap_err().to_string(), "p.regs: missing");
    }
}
