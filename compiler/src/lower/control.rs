//! If with a condition known at compile time: the chosen branch's nodes are lowered in place (its
//! values join the enclosing graph's, as ONNX names are unique across scopes); the other branch is
//! never looked at. A condition known only at run time is an error naming the input.

use super::{lookup as any_op, settle, NodeCtx, OpFn};
use crate::error::{CompileError, Result};
use crate::lazy::Lazy;
use crate::onnx::{Attr, Graph};

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "If" => if_,
        _ => return None,
    })
}

fn branch<'n>(c: &NodeCtx<'n>, name: &str) -> Result<&'n Graph> {
    let node = c.node;
    node.attrs
        .iter()
        .find_map(|(k, v)| match v {
            Attr::Graph(g) if k == name => Some(&**g),
            _ => None,
        })
        .ok_or_else(|| c.err(format!("missing graph attribute `{name}`")))
}

fn if_(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let cond = c.const_input(0)?;
    if cond.numel() != 1 {
        return Err(c.err(format!("condition of shape {:?}: one element is required", cond.shape)));
    }
    let taken = cond.to_f64()[0] != 0.0;
    let g = branch(c, if taken { "then_branch" } else { "else_branch" })?;
    for (name, t) in &g.initializers {
        let x = c.l.p.constant(t.clone());
        c.l.values.insert(name.clone(), x);
        c.l.consts.insert(name.clone(), t.clone());
    }
    for node in &g.nodes {
        if !(node.domain.is_empty() || node.domain == "ai.onnx") {
            return Err(
                c.err(format!("branch node `{}` is in domain `{}`, which is not supported", node.name, node.domain))
            );
        }
        let f = any_op(&node.op_type).ok_or_else(|| CompileError::Node {
            node: node.name.clone(),
            op: node.op_type.clone(),
            opset: c.l.opset,
            reason: "unsupported operator".into(),
        })?;
        let outs = f(&mut NodeCtx { l: &mut *c.l, node })?;
        for (name, x) in node.outputs.iter().zip(outs) {
            if !name.is_empty() {
                let x = settle(c.l, name, x);
                c.l.values.insert(name.clone(), x);
            }
        }
    }
    g.outputs
        .iter()
        .map(|o| {
            c.l.values
                .get(&o.name)
                .cloned()
                .ok_or_else(|| c.err(format!("branch output `{}` is never computed", o.name)))
        })
        .collect()
}
