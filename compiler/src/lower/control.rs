//! If. A condition known at compile time lowers the chosen branch's nodes in place (its values join
//! the enclosing graph's, as ONNX names are unique across scopes); the other branch is never looked
//! at. A condition known only at run time lowers both branches and selects each output elementwise
//! (`Where`), which needs the branches' outputs to agree in shape and element type; otherwise the
//! error names the input to pin.

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

/// Lowers the nodes of branch `g` in place and returns its outputs.
fn lower_branch(c: &mut NodeCtx<'_>, g: &Graph) -> Result<Vec<Lazy>> {
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
                let x = settle(c.l, node, name, x);
                if !c.l.p.is_constant(&x) {
                    c.l.sources.derive(name, node.inputs.iter().chain(&node.captured()));
                }
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

fn if_(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let cond = c.input(0)?;
    if cond.numel() != 1 {
        return Err(c.err(format!("condition of shape {:?}: one element is required", cond.shape)));
    }
    if c.l.p.is_constant(&cond) {
        let taken = c.const_input(0)?.to_f64()[0] != 0.0;
        let g = branch(c, if taken { "then_branch" } else { "else_branch" })?;
        return lower_branch(c, g);
    }
    let (then_g, else_g) = (branch(c, "then_branch")?, branch(c, "else_branch")?);
    let then_out = lower_branch(c, then_g)?;
    let else_out = lower_branch(c, else_g)?;
    if then_out.len() != else_out.len() {
        return Err(c.err(format!("the branches have {} and {} outputs", then_out.len(), else_out.len())));
    }
    let mut outs = Vec::with_capacity(then_out.len());
    for (k, (t, e)) in then_out.iter().zip(&else_out).enumerate() {
        if t.shape != e.shape || t.dtype != e.dtype {
            let why = c.l.sources.explain(&c.node.inputs[0]).unwrap_or_else(|| "is not".into());
            return Err(c.err(format!(
                "output {k} is {} {:?} in then_branch and {} {:?} in else_branch, so the condition must be a compile-time constant: it {why}",
                t.dtype.name(),
                t.shape,
                e.dtype.name(),
                e.shape
            )));
        }
        let cond = c.l.p.reshape(&cond, &vec![1; t.rank()]);
        let cond = c.l.p.expand(&cond, &t.shape);
        outs.push(c.l.p.where_(&cond, t, e));
    }
    Ok(outs)
}
