//! The code object's metadata (`NT_AMDGPU_METADATA`, msgpack), code object V4-V6: `amdhsa.version`,
//! `amdhsa.target` and per kernel the map LLVM AMDGPUUsage documents under "Code Object V3 Metadata"
//! (and V5's additions). Keys pilot does not know are refused, so a newer compiler's new promise cannot
//! pass unread; argument kinds other than `global_buffer` are refused (pilot fills buffer addresses
//! only: no scalars, no hidden arguments).

use super::msgpack::Value;
use super::Refusal;

/// One kernel's metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelMeta {
    pub name: String,
    /// The descriptor symbol, `NAME.kd`.
    pub symbol: String,
    pub args: Vec<ArgMeta>,
    pub kernarg_segment_size: u32,
    pub kernarg_segment_align: u32,
    pub group_segment_fixed_size: u32,
    pub private_segment_fixed_size: u32,
    pub wavefront_size: u32,
    pub sgpr_count: u32,
    pub vgpr_count: u32,
    pub max_flat_workgroup_size: u32,
    /// `reqd_work_group_size`, when the source pinned one.
    pub reqd_workgroup_size: Option<[u32; 3]>,
}

/// A kernel argument: a global buffer's 64-bit address at `offset` of the kernarg segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgMeta {
    pub name: Option<String>,
    pub offset: u32,
    pub size: u32,
}

/// Kernel keys read above, and keys that only inform (language, spill counts, hints).
const KERNEL_KEYS: [&str; 13] = [
    ".name",
    ".symbol",
    ".args",
    ".kernarg_segment_size",
    ".kernarg_segment_align",
    ".group_segment_fixed_size",
    ".private_segment_fixed_size",
    ".wavefront_size",
    ".sgpr_count",
    ".vgpr_count",
    ".max_flat_workgroup_size",
    ".reqd_workgroup_size",
    ".uses_dynamic_stack",
];
const KERNEL_INFO_KEYS: [&str; 10] = [
    ".language",
    ".language_version",
    ".sgpr_spill_count",
    ".vgpr_spill_count",
    ".agpr_count",
    ".uniform_work_group_size",
    ".workgroup_processor_mode",
    ".workgroup_size_hint",
    ".vec_type_hint",
    ".kind",
];
const ARG_KEYS: [&str; 13] = [
    ".name",
    ".type_name",
    ".offset",
    ".size",
    ".value_kind",
    ".address_space",
    ".is_const",
    ".is_restrict",
    ".is_volatile",
    ".is_pipe",
    ".access",
    ".actual_access",
    ".pointee_align",
];

fn refuse(field: impl Into<String>, msg: impl Into<String>) -> Refusal {
    Refusal { field: field.into(), msg: msg.into() }
}

/// The kernels of a metadata document for `target` (`amdgcn-amd-amdhsa--gfx1100`). A refusal's field
/// is a path such as `amdhsa.kernels[2].args[0].value_kind`.
pub fn kernels(doc: &Value, target: &str) -> Result<Vec<KernelMeta>, Refusal> {
    let Value::Map(top) = doc else { return Err(refuse("metadata", format!("is a {}, not a map", doc.type_name()))) };
    for (k, _) in top {
        match k {
            Value::Str(s) if ["amdhsa.version", "amdhsa.target", "amdhsa.kernels"].contains(&s.as_str()) => {}
            Value::Str(s) if s == "amdhsa.printf" => {
                return Err(refuse(s.clone(), "printf needs a buffer pilot does not provide"))
            }
            other => return Err(refuse(format!("{other:?}"), "unknown top-level key")),
        }
    }
    match doc.get("amdhsa.version") {
        Some(Value::Array(v)) if matches!(v.as_slice(), [Value::Int(1), Value::Int(0..=3)]) => {}
        other => return Err(refuse("amdhsa.version", format!("is {other:?}, not [1, 0..3]"))),
    }
    match doc.get("amdhsa.target") {
        Some(Value::Str(t)) if t == target => {}
        other => return Err(refuse("amdhsa.target", format!("is {other:?}, not {target:?} (the ELF header's GPU)"))),
    }
    let Some(Value::Array(list)) = doc.get("amdhsa.kernels") else {
        return Err(refuse("amdhsa.kernels", "missing or not an array"));
    };
    list.iter().enumerate().map(|(i, k)| kernel(&format!("amdhsa.kernels[{i}]"), k)).collect()
}

/// A map's fields, read by key with the path in every refusal.
struct Fields<'a> {
    path: String,
    map: &'a Value,
}

impl<'a> Fields<'a> {
    fn new(path: String, v: &'a Value, known: &[&[&str]]) -> Result<Fields<'a>, Refusal> {
        let Value::Map(entries) = v else { return Err(refuse(path, format!("is a {}, not a map", v.type_name()))) };
        for (k, _) in entries {
            let Value::Str(key) = k else { return Err(refuse(&path, format!("key {k:?} is not a string"))) };
            if !known.iter().any(|set| set.contains(&key.as_str())) {
                return Err(refuse(format!("{path}.{}", key.trim_start_matches('.')), "unknown key"));
            }
        }
        Ok(Fields { path, map: v })
    }

    fn at(&self, key: &str) -> String {
        format!("{}.{}", self.path, key.trim_start_matches('.'))
    }

    fn opt(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key)
    }

    fn str(&self, key: &str) -> Result<&'a str, Refusal> {
        match self.opt(key) {
            Some(Value::Str(s)) => Ok(s),
            other => Err(refuse(self.at(key), format!("is {other:?}, not a string"))),
        }
    }

    fn u32(&self, key: &str) -> Result<u32, Refusal> {
        self.opt_u32(key)?.ok_or_else(|| refuse(self.at(key), "missing"))
    }

    fn opt_u32(&self, key: &str) -> Result<Option<u32>, Refusal> {
        match self.opt(key) {
            None => Ok(None),
            Some(Value::Int(n)) => {
                u32::try_from(*n).map(Some).map_err(|_| refuse(self.at(key), format!("{n} is not a u32")))
            }
            Some(other) => Err(refuse(self.at(key), format!("is a {}, not an integer", other.type_name()))),
        }
    }
}

fn kernel(path: &str, v: &Value) -> Result<KernelMeta, Refusal> {
    let f = Fields::new(path.to_string(), v, &[&KERNEL_KEYS, &KERNEL_INFO_KEYS])?;
    if let Some(Value::Bool(true)) = f.opt(".uses_dynamic_stack") {
        return Err(refuse(f.at(".uses_dynamic_stack"), "is true: scratch must be sized at compile time"));
    }
    if let Some(kind) = f.opt(".kind") {
        if *kind != Value::Str("normal".into()) {
            return Err(refuse(f.at(".kind"), format!("is {kind:?}, not \"normal\"")));
        }
    }
    let args = match f.opt(".args") {
        None => vec![],
        Some(Value::Array(list)) => {
            list.iter().enumerate().map(|(i, a)| arg(&f.at(&format!("args[{i}]")), a)).collect::<Result<_, _>>()?
        }
        Some(other) => return Err(refuse(f.at(".args"), format!("is a {}, not an array", other.type_name()))),
    };
    let reqd_workgroup_size = match f.opt(".reqd_workgroup_size") {
        None => None,
        Some(Value::Array(d)) => match d.as_slice() {
            [Value::Int(x), Value::Int(y), Value::Int(z)] => {
                let dim = |n: &i128| u32::try_from(*n).map_err(|_| refuse(f.at(".reqd_workgroup_size"), "not u32"));
                Some([dim(x)?, dim(y)?, dim(z)?])
            }
            _ => return Err(refuse(f.at(".reqd_workgroup_size"), "not three integers")),
        },
        Some(other) => return Err(refuse(f.at(".reqd_workgroup_size"), format!("is a {}", other.type_name()))),
    };
    Ok(KernelMeta {
        name: f.str(".name")?.to_string(),
        symbol: f.str(".symbol")?.to_string(),
        args,
        kernarg_segment_size: f.u32(".kernarg_segment_size")?,
        kernarg_segment_align: f.u32(".kernarg_segment_align")?,
        group_segment_fixed_size: f.u32(".group_segment_fixed_size")?,
        private_segment_fixed_size: f.u32(".private_segment_fixed_size")?,
        wavefront_size: f.u32(".wavefront_size")?,
        sgpr_count: f.u32(".sgpr_count")?,
        vgpr_count: f.u32(".vgpr_count")?,
        max_flat_workgroup_size: f.u32(".max_flat_workgroup_size")?,
        reqd_workgroup_size,
    })
}

fn arg(path: &str, v: &Value) -> Result<ArgMeta, Refusal> {
    let f = Fields::new(path.to_string(), v, &[&ARG_KEYS])?;
    let kind = f.str(".value_kind")?;
    if kind != "global_buffer" {
        return Err(refuse(f.at(".value_kind"), format!("is `{kind}`: pilot fills only global_buffer arguments")));
    }
    if let Some(space) = f.opt(".address_space") {
        if *space != Value::Str("global".into()) {
            return Err(refuse(f.at(".address_space"), format!("is {space:?}, not \"global\"")));
        }
    }
    let size = f.u32(".size")?;
    if size != 8 {
        return Err(refuse(f.at(".size"), format!("is {size}, not 8 (a 64-bit address)")));
    }
    Ok(ArgMeta {
        name: match f.opt(".name") {
            Some(Value::Str(s)) => Some(s.clone()),
            _ => None,
        },
        offset: f.u32(".offset")?,
        size,
    })
}
