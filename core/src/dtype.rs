//! Element types of tensors and buffers, with their artifact and numpy names.

/// An element type. The artifact names are the numpy names (`"float32"`, `"uint8"`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
    /// bfloat16: float32's sign, exponent and top 7 mantissa bits (ml_dtypes' `bfloat16`).
    BF16,
    F64,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    Bool,
}

impl DType {
    pub const ALL: [DType; 13] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::Bool,
    ];

    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 | DType::Bool => 1,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    /// The numpy name, which is also the artifact's name for the type (`bfloat16` is ml_dtypes' name:
    /// numpy itself has none).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F64 => "float64",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::Bool => "bool",
        }
    }

    /// Parses a numpy/artifact name; `None` for anything else.
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
    }
}

/// Decodes little-endian elements of `dtype` to f64 (exact for floats and for integers up to 2^53).
/// Trailing bytes that do not make a whole element are ignored.
pub fn to_f64(dtype: DType, bytes: &[u8]) -> Vec<f64> {
    let sz = dtype.size();
    bytes
        .chunks_exact(sz)
        .map(|b| {
            let mut w = [0u8; 8];
            w[..sz].copy_from_slice(b);
            match dtype {
                DType::F32 => f32::from_le_bytes([w[0], w[1], w[2], w[3]]) as f64,
                DType::F64 => f64::from_le_bytes(w),
                DType::F16 => half::f16::from_le_bytes([w[0], w[1]]).to_f64(),
                DType::BF16 => half::bf16::from_le_bytes([w[0], w[1]]).to_f64(),
                DType::I8 => w[0] as i8 as f64,
                DType::U8 | DType::Bool => w[0] as f64,
                DType::I16 => i16::from_le_bytes([w[0], w[1]]) as f64,
                DType::U16 => u16::from_le_bytes([w[0], w[1]]) as f64,
                DType::I32 => i32::from_le_bytes([w[0], w[1], w[2], w[3]]) as f64,
                DType::U32 => u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as f64,
                DType::I64 => i64::from_le_bytes(w) as f64,
                DType::U64 => u64::from_le_bytes(w) as f64,
            }
        })
        .collect()
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
        }
        assert_eq!(DType::from_name("complex64"), None);
    }
}
