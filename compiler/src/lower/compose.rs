//! Composite operators lowered through other operators' own lowerings: an op like ConvInteger is a
//! Conv over integer operands, so it runs the Conv lowering (with its image path, windowing and
//! realization policy) on values it prepared, instead of duplicating it.

use super::{lookup, NodeCtx};
use crate::error::Result;
use crate::lazy::Lazy;
use crate::onnx::{Attr, Node};

/// Runs the lowering of `op` on `inputs` (`None`: an omitted optional input) with `attrs`, as a node
/// named after the current one. The values live under names no ONNX model can produce (they start
/// with a NUL) and are removed afterwards.
pub(super) fn run_op(
    c: &mut NodeCtx<'_>,
    op: &str,
    inputs: &[Option<&Lazy>],
    attrs: Vec<(String, Attr)>,
) -> Result<Vec<Lazy>> {
    let f = lookup(op).ok_or_else(|| c.err(format!("composes `{op}`, which pilot does not lower")))?;
    let names: Vec<String> = inputs
        .iter()
        .enumerate()
        .map(|(i, x)| if x.is_some() { format!("\0{}/{op}/{i}", c.node.name) } else { String::new() })
        .collect();
    for (name, x) in names.iter().zip(inputs) {
        if let Some(x) = x {
            c.l.values.insert(name.clone(), (*x).clone());
        }
    }
    let node = Node {
        name: c.node.name.clone(),
        op_type: op.to_string(),
        domain: String::new(),
        inputs: names.clone(),
        outputs: vec![],
        attrs,
    };
    let out = f(&mut NodeCtx { l: &mut *c.l, node: &node });
    for name in names.iter().filter(|n| !n.is_empty()) {
        c.l.values.remove(name);
        c.l.consts.remove(name);
    }
    out
}

/// The current node's attributes named in `keep`.
pub(super) fn attrs_of(c: &NodeCtx<'_>, keep: &[&str]) -> Vec<(String, Attr)> {
    c.node.attrs.iter().filter(|(k, _)| keep.contains(&k.as_str())).cloned().collect()
}

/// One integer attribute.
pub(super) fn int_attr(name: &str, v: i64) -> (String, Attr) {
    (name.to_string(), Attr::Int(v))
}
