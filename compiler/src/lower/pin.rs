//! Graph inputs pinned to a value at compile time (`pilot compile --const NAME=FILE.npy`): each value
//! is checked against the input's declaration, then folded like an initializer, and the input leaves
//! the runtime signature. Which run-time inputs a value is computed from is tracked too, so that a
//! value the lowering needs at compile time names the input to pin.

use std::collections::{BTreeMap, HashMap};

use crate::error::{CompileError, Result};
use crate::onnx::{Dim, Graph, ValueInfo};
use crate::tensor::Tensor;

/// Pinned inputs by name (ordered, so the artifact's record does not depend on hashing).
pub type Pins = BTreeMap<String, Tensor>;

/// Refuses pins that name no graph input (an initializer is already constant).
pub fn check_names(g: &Graph, pins: &Pins) -> Result<()> {
    for name in pins.keys() {
        if g.initializer(name).is_some() {
            return Err(CompileError::Graph(format!("--const {name}: `{name}` is an initializer, already constant")));
        }
        if !g.real_inputs().any(|i| &i.name == name) {
            return Err(CompileError::Graph(format!("--const names `{name}`, which is not a model input")));
        }
    }
    Ok(())
}

/// Checks the value `t` pinned for input `vi`: the declared element type, the declared rank and
/// fixed dimensions, and the shape given with `--shape` for the same input, if any.
pub fn check_value(vi: &ValueInfo, t: &Tensor, shape: Option<&Vec<usize>>) -> Result<()> {
    let name = &vi.name;
    let err = |reason: String| Err(CompileError::Graph(format!("--const {name}: {reason}")));
    match vi.dtype {
        Some(d) if d == t.dtype => {}
        Some(d) => return err(format!("the value is {}, the model declares {}", t.dtype.name(), d.name())),
        None => return err("the model declares no supported element type for this input".into()),
    }
    if let Some(dims) = &vi.dims {
        if dims.len() != t.shape.len() {
            return err(format!("the value has shape {:?}, the model declares rank {}", t.shape, dims.len()));
        }
        for (i, (d, &v)) in dims.iter().zip(&t.shape).enumerate() {
            if let Dim::Fixed(f) = d {
                if *f >= 0 && *f as usize != v {
                    return err(format!("the value has shape {:?}, the model fixes dimension {i} to {f}", t.shape));
                }
            }
        }
    }
    if let Some(s) = shape.filter(|s| **s != t.shape) {
        return err(format!("the value has shape {:?}, --shape gives {s:?}", t.shape));
    }
    Ok(())
}

/// The xxh3 of a pinned value's bytes, as the artifact records it.
pub fn hash(t: &Tensor) -> String {
    format!("xxh3:{:016x}", pilot_core::artifact::checksum(&t.data))
}

/// The run-time graph inputs each value is computed from (values folded to constants have none).
#[derive(Default)]
pub struct Sources {
    of: HashMap<String, Vec<String>>,
}

impl Sources {
    /// Records a run-time graph input.
    pub fn input(&mut self, name: &str) {
        self.of.insert(name.to_string(), vec![name.to_string()]);
    }

    /// Records that `output` is computed from the values `inputs`.
    pub fn derive<'a>(&mut self, output: &str, inputs: impl IntoIterator<Item = &'a String>) {
        let mut from: Vec<String> = inputs.into_iter().filter_map(|i| self.of.get(i)).flatten().cloned().collect();
        from.sort();
        from.dedup();
        if !from.is_empty() {
            self.of.insert(output.to_string(), from);
        }
    }

    /// Why value `name` is not known at compile time, naming the run-time inputs to pin, if any.
    pub fn explain(&self, name: &str) -> Option<String> {
        let from = self.of.get(name)?;
        let pins: Vec<String> = from.iter().map(|i| format!("--const {i}=FILE.npy")).collect();
        Some(if from.len() == 1 && from[0] == name {
            format!("is the model input `{name}`, given at run time: pin it with {}", pins[0])
        } else {
            let names: Vec<String> = from.iter().map(|i| format!("`{i}`")).collect();
            format!("is computed from the run-time model input(s) {}: pin with {}", names.join(", "), pins.join(" "))
        })
    }
}

#[cfg(test)]
mod tests {
    use pilot_core::DType;

    use super::*;

    fn declared(dims: Vec<Dim>) -> ValueInfo {
        ValueInfo { name: "shape".into(), dtype: Some(DType::I64), dims: Some(dims) }
    }

    #[test]
    fn values_are_checked_against_the_declaration() {
        let t = Tensor::from_i64(vec![2], &[4, 6]);
        assert!(check_value(&declared(vec![Dim::Fixed(2)]), &t, None).is_ok());
        assert!(check_value(&declared(vec![Dim::Named("n".into())]), &t, None).is_ok());
        let e = |vi: &ValueInfo, t: &Tensor, s: Option<&Vec<usize>>| check_value(vi, t, s).unwrap_err().to_string();
        assert!(e(&declared(vec![Dim::Fixed(3)]), &t, None).contains("fixes dimension 0 to 3"));
        assert!(e(&declared(vec![Dim::Fixed(1), Dim::Fixed(2)]), &t, None).contains("rank 2"));
        let f = Tensor::from_f32(vec![2], &[4.0, 6.0]);
        assert!(e(&declared(vec![Dim::Fixed(2)]), &f, None).contains("float32, the model declares int64"));
        assert!(e(&declared(vec![Dim::Unknown]), &t, Some(&vec![3])).contains("--shape gives [3]"));
    }

    #[test]
    fn sources_name_the_inputs_to_pin() {
        let mut s = Sources::default();
        s.input("a");
        s.input("b");
        s.derive("sum", &["a".to_string(), "b".to_string(), "w".to_string()]);
        s.derive("folded", &["w".to_string()]);
        assert!(s.explain("a").unwrap().contains("is the model input `a`, given at run time: pin it with --const a="));
        let sum = s.explain("sum").unwrap();
        assert!(sum.contains("`a`, `b`") && sum.contains("--const a=FILE.npy --const b=FILE.npy"), "{sum}");
        assert_eq!(s.explain("folded"), None, "a value from constants only has no run-time sources");
    }
}
