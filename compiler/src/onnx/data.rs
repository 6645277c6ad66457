//! `TensorProto` → [`Tensor`]: element types, raw and typed data fields, size checks.

use std::path::Path;

use pilot_core::DType;

use super::error::ImportError;
use super::external;
use super::proto::tensor_proto::{DataLocation, DataType};
use super::proto::TensorProto;
use crate::tensor::Tensor;

/// The pilot dtype of an ONNX `TensorProto.DataType` code (also the encoding of `Cast.to` and
/// similar attributes); `None` for codes pilot does not support (string, complex, float8,
/// 4-bit, ...) and for unknown codes.
pub fn dtype_from_onnx(code: i64) -> Option<DType> {
    let ty = DataType::try_from(i32::try_from(code).ok()?).ok()?;
    Some(match ty {
        DataType::Float => DType::F32,
        DataType::Float16 => DType::F16,
        DataType::Bfloat16 => DType::BF16,
        DataType::Double => DType::F64,
        DataType::Int8 => DType::I8,
        DataType::Int16 => DType::I16,
        DataType::Int32 => DType::I32,
        DataType::Int64 => DType::I64,
        DataType::Uint8 => DType::U8,
        DataType::Uint16 => DType::U16,
        DataType::Uint32 => DType::U32,
        DataType::Uint64 => DType::U64,
        DataType::Bool => DType::Bool,
        _ => return None,
    })
}

/// The ONNX `TensorProto.DataType` code of a pilot dtype (inverse of [`dtype_from_onnx`]).
pub fn onnx_dtype_code(dtype: DType) -> i64 {
    let ty = match dtype {
        DType::F32 => DataType::Float,
        DType::F16 => DataType::Float16,
        DType::BF16 => DataType::Bfloat16,
        DType::F64 => DataType::Double,
        DType::I8 => DataType::Int8,
        DType::I16 => DataType::Int16,
        DType::I32 => DataType::Int32,
        DType::I64 => DataType::Int64,
        DType::U8 => DataType::Uint8,
        DType::U16 => DataType::Uint16,
        DType::U32 => DataType::Uint32,
        DType::U64 => DataType::Uint64,
        DType::Bool => DataType::Bool,
    };
    ty as i64
}

/// The ONNX spelling of a `TensorProto.DataType` code ("FLOAT", "BFLOAT16", ...), for messages.
pub fn onnx_dtype_name(code: i64) -> String {
    i32::try_from(code)
        .ok()
        .and_then(|c| DataType::try_from(c).ok())
        .map(|t| t.as_str_name().to_string())
        .unwrap_or_else(|| format!("unknown data type {code}"))
}

/// Decodes one tensor, taking its data out of `t` (no copy of raw data).
///
/// The element count is the product of `dims` (no dims: a scalar); it must equal the number of
/// elements in whichever data source the tensor uses: external data (`base_dir` is the model's
/// directory), else `raw_data` (little-endian), else the typed field for the dtype. Narrow integer,
/// bool, float16 and bfloat16 values held in `int32_data` are truncated to their width, as onnx's
/// `numpy_helper` does.
pub(crate) fn decode_tensor(mut t: TensorProto, base_dir: Option<&Path>) -> Result<Tensor, ImportError> {
    let name = t.name.take().unwrap_or_default();
    let code = t.data_type.unwrap_or(0);
    let dtype = dtype_from_onnx(code.into()).ok_or_else(|| ImportError::UnsupportedDType {
        what: format!("tensor {name:?}"),
        dtype: onnx_dtype_name(code.into()),
    })?;
    if t.segment.is_some() {
        return Err(ImportError::bad_tensor(&name, "segmented tensors are not supported"));
    }
    let shape = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| ImportError::bad_tensor(&name, format!("negative dimension {d}"))))
        .collect::<Result<Vec<usize>, _>>()?;
    let too_big = || ImportError::bad_tensor(&name, format!("dims {:?} overflow the address space", t.dims));
    let numel = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(too_big)?;
    let nbytes = numel.checked_mul(dtype.size()).ok_or_else(too_big)?;
    let data = match t.data_location {
        Some(loc) if loc == DataLocation::External as i32 => external::read(&name, &t.external_data, nbytes, base_dir)?,
        None | Some(0) => match t.raw_data.take() {
            Some(raw) if raw.len() == nbytes => raw,
            Some(raw) => {
                let reason = format!("raw_data has {} bytes, {dtype} dims {shape:?} need {nbytes}", raw.len());
                return Err(ImportError::bad_tensor(&name, reason));
            }
            None => typed(&t, &name, dtype, numel)?,
        },
        Some(loc) => return Err(ImportError::bad_tensor(&name, format!("unknown data_location {loc}"))),
    };
    Ok(Tensor { dtype, shape, data })
}

/// Packs the typed field of `dtype` as little-endian bytes after checking it holds `numel` values.
fn typed(t: &TensorProto, name: &str, dtype: DType, numel: usize) -> Result<Vec<u8>, ImportError> {
    let i32s = &t.int32_data;
    match dtype {
        DType::F32 => pack(name, "float_data", &t.float_data, numel, f32::to_le_bytes),
        DType::F64 => pack(name, "double_data", &t.double_data, numel, f64::to_le_bytes),
        DType::I64 => pack(name, "int64_data", &t.int64_data, numel, i64::to_le_bytes),
        DType::U64 => pack(name, "uint64_data", &t.uint64_data, numel, u64::to_le_bytes),
        DType::U32 => pack(name, "uint64_data", &t.uint64_data, numel, |v| (v as u32).to_le_bytes()),
        DType::I32 => pack(name, "int32_data", i32s, numel, i32::to_le_bytes),
        DType::I16 => pack(name, "int32_data", i32s, numel, |v| (v as i16).to_le_bytes()),
        DType::U16 | DType::F16 | DType::BF16 => pack(name, "int32_data", i32s, numel, |v| (v as u16).to_le_bytes()),
        DType::I8 => pack(name, "int32_data", i32s, numel, |v| [v as i8 as u8]),
        DType::U8 => pack(name, "int32_data", i32s, numel, |v| [v as u8]),
        DType::Bool => pack(name, "int32_data", i32s, numel, |v| [u8::from(v != 0)]),
    }
}

fn pack<T: Copy, const N: usize>(
    name: &str,
    field: &str,
    values: &[T],
    numel: usize,
    le: impl Fn(T) -> [u8; N],
) -> Result<Vec<u8>, ImportError> {
    if values.len() != numel {
        let reason = format!("no raw_data and {field} has {} values, dims need {numel}", values.len());
        return Err(ImportError::bad_tensor(name, reason));
    }
    Ok(values.iter().flat_map(|&v| le(v)).collect())
}
