//! What dispatching an `amdgpu` program needs, as the compiler read it from the code object (kernel
//! descriptor and metadata) and recorded it under the program's `"amdgpu"` key:
//!
//! ```text
//! "amdgpu": {"descriptor": off, "code": off, "rsrc": (rsrc1, rsrc2, rsrc3),
//!            "kernarg": (size, align), "arg_offsets": [off..], "user_sgprs": n,
//!            "vgprs": n, "sgprs": n, "lds": bytes, "scratch": bytes, "wave32": True}
//! ```
//! Offsets are into the code object's loaded image. Present exactly on `amdgpu` programs.

use super::pickle::Value;
use super::schema::{err, SchemaError};

/// One kernel's dispatch facts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AmdDispatch {
    /// Image offset of the 64-byte kernel descriptor.
    pub descriptor: u64,
    /// Image offset of the first instruction (256-byte aligned).
    pub code: u64,
    /// COMPUTE_PGM_RSRC1, RSRC2 and RSRC3 as the descriptor holds them.
    pub rsrc: [u32; 3],
    /// Bytes of the kernarg segment, and its alignment.
    pub kernarg_size: u32,
    pub kernarg_align: u32,
    /// Byte offset of each argument's 64-bit address in the kernarg segment, in argument order.
    pub arg_offsets: Vec<u32>,
    /// SGPRs loaded from COMPUTE_USER_DATA_*: the kernarg address in the first two, zeros after.
    pub user_sgprs: u32,
    pub vgprs: u32,
    pub sgprs: u32,
    /// LDS bytes per work-group and scratch bytes per work-item.
    pub lds: u32,
    pub scratch: u32,
    pub wave32: bool,
}

/// Largest LDS a work-group may have on these GPUs (64 KiB).
pub const MAX_LDS: u32 = 64 << 10;

impl AmdDispatch {
    pub(crate) fn encode(&self) -> Value {
        let int = |x: u64| Value::Int(x as i64);
        let pair = |a: u32, b: u32| Value::Tuple(vec![int(a.into()), int(b.into())]);
        let entries = vec![
            ("descriptor", int(self.descriptor)),
            ("code", int(self.code)),
            ("rsrc", Value::Tuple(self.rsrc.iter().map(|&r| int(r.into())).collect())),
            ("kernarg", pair(self.kernarg_size, self.kernarg_align)),
            ("arg_offsets", Value::List(self.arg_offsets.iter().map(|&o| int(o.into())).collect())),
            ("user_sgprs", int(self.user_sgprs.into())),
            ("vgprs", int(self.vgprs.into())),
            ("sgprs", int(self.sgprs.into())),
            ("lds", int(self.lds.into())),
            ("scratch", int(self.scratch.into())),
            ("wave32", Value::Bool(self.wave32)),
        ];
        Value::Dict(entries.into_iter().map(|(k, v)| (Value::str(k), v)).collect())
    }

    pub(crate) fn decode(path: &str, v: &Value) -> Result<AmdDispatch, SchemaError> {
        let Value::Dict(entries) = v else { return Err(err(path, format!("expected dict, found {}", v.type_name()))) };
        const KNOWN: &[&str] = &[
            "descriptor",
            "code",
            "rsrc",
            "kernarg",
            "arg_offsets",
            "user_sgprs",
            "vgprs",
            "sgprs",
            "lds",
            "scratch",
            "wave32",
        ];
        super::schema::check_keys(path, entries, KNOWN)?;
        let get = |key: &str| {
            entries
                .iter()
                .find(|(k, _)| matches!(k, Value::Str(s) if s == key))
                .map(|(_, v)| v)
                .ok_or_else(|| err(format!("{path}.{key}"), "missing"))
        };
        let uint = |p: String, v: &Value| match v {
            Value::Int(i) if *i >= 0 => Ok(*i as u64),
            other => Err(err(p, format!("expected a non-negative int, found {other:?}"))),
        };
        let u32_of = |p: String, v: &Value| {
            uint(p.clone(), v).and_then(|x| u32::try_from(x).map_err(|_| err(p, format!("{x} exceeds u32"))))
        };
        let field = |key: &str| u32_of(format!("{path}.{key}"), get(key)?);
        let list = |key: &str| match get(key)? {
            Value::List(items) | Value::Tuple(items) => {
                items.iter().enumerate().map(|(i, x)| u32_of(format!("{path}.{key}[{i}]"), x)).collect()
            }
            other => Err(err(format!("{path}.{key}"), format!("expected list, found {}", other.type_name()))),
        };
        let rsrc: Vec<u32> = list("rsrc")?;
        let kernarg: Vec<u32> = list("kernarg")?;
        let (Ok(rsrc), Ok([kernarg_size, kernarg_align])) = (<[u32; 3]>::try_from(rsrc), <[u32; 2]>::try_from(kernarg))
        else {
            return Err(err(path, "expected rsrc as 3 words and kernarg as (size, align)"));
        };
        Ok(AmdDispatch {
            descriptor: uint(format!("{path}.descriptor"), get("descriptor")?)?,
            code: uint(format!("{path}.code"), get("code")?)?,
            rsrc,
            kernarg_size,
            kernarg_align,
            arg_offsets: list("arg_offsets")?,
            user_sgprs: field("user_sgprs")?,
            vgprs: field("vgprs")?,
            sgprs: field("sgprs")?,
            lds: field("lds")?,
            scratch: field("scratch")?,
            wave32: match get("wave32")? {
                Value::Bool(b) => *b,
                other => {
                    return Err(err(format!("{path}.wave32"), format!("expected bool, found {}", other.type_name())))
                }
            },
        })
    }

    /// The meaning checks for a program of `args` arguments: every address inside the segment,
    /// aligned and apart, the pointer in user SGPRs, wave32, LDS within the GPU's.
    pub(crate) fn check(&self, path: &str, args: usize) -> Result<(), SchemaError> {
        if self.arg_offsets.len() != args {
            return Err(err(
                format!("{path}.arg_offsets"),
                format!("{} offsets for {args} arguments", self.arg_offsets.len()),
            ));
        }
        let mut end = 0u64;
        for (i, &o) in self.arg_offsets.iter().enumerate() {
            if u64::from(o) < end || !o.is_multiple_of(8) || u64::from(o) + 8 > u64::from(self.kernarg_size) {
                return Err(err(
                    format!("{path}.arg_offsets[{i}]"),
                    format!("{o} overlaps, is unaligned or passes the {}-byte segment", self.kernarg_size),
                ));
            }
            end = u64::from(o) + 8;
        }
        if !self.kernarg_align.is_power_of_two() || self.kernarg_align > 64 {
            return Err(err(
                format!("{path}.kernarg"),
                format!("alignment {} is not a power of two ≤ 64", self.kernarg_align),
            ));
        }
        if args > 0 && self.user_sgprs < 2 {
            return Err(err(format!("{path}.user_sgprs"), "fewer than the two the kernarg address needs"));
        }
        // The hardware loads user SGPRs from COMPUTE_USER_DATA_0..15 only.
        if self.user_sgprs > 16 {
            return Err(err(
                format!("{path}.user_sgprs"),
                format!("{} exceeds the 16 COMPUTE_USER_DATA registers", self.user_sgprs),
            ));
        }
        if !self.wave32 {
            return Err(err(format!("{path}.wave32"), "pilot dispatches wave32 only"));
        }
        if self.lds > MAX_LDS {
            return Err(err(format!("{path}.lds"), format!("{} bytes exceed {MAX_LDS}", self.lds)));
        }
        if !self.code.is_multiple_of(256) || !self.descriptor.is_multiple_of(64) {
            return Err(err(path, "code must be 256-byte and the descriptor 64-byte aligned"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> AmdDispatch {
        AmdDispatch {
            descriptor: 0x800,
            code: 0x1900,
            rsrc: [0x60AF_0080, 0x9E, 0],
            kernarg_size: 24,
            kernarg_align: 8,
            arg_offsets: vec![0, 8, 16],
            user_sgprs: 15,
            vgprs: 5,
            sgprs: 18,
            lds: 0,
            scratch: 0,
            wave32: true,
        }
    }

    #[test]
    fn round_trips_and_checks() {
        let d = sample();
        assert_eq!(AmdDispatch::decode("p", &d.encode()).unwrap(), d);
        d.check("p", 3).unwrap();
        assert_eq!(d.check("p", 2).unwrap_err().to_string(), "p.arg_offsets: 3 offsets for 2 arguments");
        let mut bad = d.clone();
        bad.arg_offsets[2] = 20;
        assert_eq!(
            bad.check("p", 3).unwrap_err().to_string(),
            "p.arg_offsets[2]: 20 overlaps, is unaligned or passes the 24-byte segment"
        );
        let mut bad = d.clone();
        bad.wave32 = false;
        assert_eq!(bad.check("p", 3).unwrap_err().to_string(), "p.wave32: pilot dispatches wave32 only");
        let Value::Dict(mut entries) = d.encode() else { unreachable!() };
        entries.retain(|(k, _)| *k != Value::str("vgprs"));
        assert_eq!(AmdDispatch::decode("p", &Value::Dict(entries)).unwrap_err().to_string(), "p.vgprs: missing");
    }

    /// #26 item 10: the hardware has 16 user-data registers; 17 to 31 used to pass.
    #[test]
    fn more_user_sgprs_than_user_data_registers_are_refused() {
        let mut d = sample();
        d.user_sgprs = 16;
        d.check("p", 3).unwrap();
        for n in [17, 31] {
            d.user_sgprs = n;
            let e = d.check("p", 3).unwrap_err().to_string();
            assert_eq!(e, format!("p.user_sgprs: {n} exceeds the 16 COMPUTE_USER_DATA registers"));
        }
    }
}
