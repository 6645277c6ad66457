//! Host tensors: constants, initializers and folded values, stored as packed little-endian bytes.

use pilot_core::DType;

/// A dense host tensor in C order.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// `numel() * dtype.size()` bytes, little-endian.
    pub data: Vec<u8>,
}

impl Tensor {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// A tensor of `dtype` and `shape` from raw little-endian bytes; `None` if the length is wrong.
    pub fn from_bytes(dtype: DType, shape: Vec<usize>, data: Vec<u8>) -> Option<Tensor> {
        let n = shape.iter().try_fold(dtype.size(), |a, &d| a.checked_mul(d))?;
        (n == data.len()).then_some(Tensor { dtype, shape, data })
    }

    pub fn from_f32(shape: Vec<usize>, values: &[f32]) -> Tensor {
        Tensor { dtype: DType::F32, shape, data: values.iter().flat_map(|v| v.to_le_bytes()).collect() }
    }

    pub fn from_i64(shape: Vec<usize>, values: &[i64]) -> Tensor {
        Tensor { dtype: DType::I64, shape, data: values.iter().flat_map(|v| v.to_le_bytes()).collect() }
    }

    /// Element `i` as an IR constant (exact for every dtype, int64 included); `None` out of range.
    pub fn element(&self, i: usize) -> Option<crate::ir::Const> {
        let sz = self.dtype.size();
        let b = self.data.get(i.checked_mul(sz)?..(i + 1).checked_mul(sz)?)?;
        let mut w = [0u8; 8];
        w[..sz].copy_from_slice(b);
        Some(match self.dtype {
            DType::I64 | DType::U64 => crate::ir::Const::Int(i64::from_le_bytes(w)),
            d if d.is_float() => crate::ir::Const::float(pilot_core::dtype::to_f64(d, b)[0]),
            d => crate::ir::Const::Int(pilot_core::dtype::to_f64(d, b)[0] as i64),
        })
    }

    /// Every element converted to f64 (exact for all integer types up to 2^53 and all floats).
    pub fn to_f64(&self) -> Vec<f64> {
        pilot_core::dtype::to_f64(self.dtype, &self.data)
    }

    /// Every element as i64 (floats truncate toward zero); for shape-like inputs.
    pub fn to_i64(&self) -> Vec<i64> {
        if self.dtype == DType::I64 {
            return self.data.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
        }
        self.to_f64().into_iter().map(|v| v as i64).collect()
    }

    pub fn to_f32(&self) -> Vec<f32> {
        if self.dtype == DType::F32 {
            return self.data.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        }
        self.to_f64().into_iter().map(|v| v as f32).collect()
    }

    /// Builds a tensor of `dtype` from f64 values (rounding/saturating as a C cast would for in-range values).
    pub fn from_f64(dtype: DType, shape: Vec<usize>, values: &[f64]) -> Tensor {
        let mut data = Vec::with_capacity(values.len() * dtype.size());
        for &v in values {
            match dtype {
                DType::F32 => data.extend_from_slice(&(v as f32).to_le_bytes()),
                DType::F64 => data.extend_from_slice(&v.to_le_bytes()),
                DType::F16 => data.extend_from_slice(&half::f16::from_f64(v).to_le_bytes()),
                DType::BF16 => data.extend_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
                DType::I8 => data.push(v as i8 as u8),
                DType::U8 => data.push(v as u8),
                DType::Bool => data.push((v != 0.0) as u8),
                DType::I16 => data.extend_from_slice(&(v as i16).to_le_bytes()),
                DType::U16 => data.extend_from_slice(&(v as u16).to_le_bytes()),
                DType::I32 => data.extend_from_slice(&(v as i32).to_le_bytes()),
                DType::U32 => data.extend_from_slice(&(v as u32).to_le_bytes()),
                DType::I64 => data.extend_from_slice(&(v as i64).to_le_bytes()),
                DType::U64 => data.extend_from_slice(&(v as u64).to_le_bytes()),
            }
        }
        Tensor { dtype, shape, data }
    }
}
