//! The activation functions of the recurrent layers, with their `activations`,
//! `activation_alpha` and `activation_beta` attributes.

use super::super::elementwise::{konst, sigmoid, with};
use super::super::NodeCtx;
use crate::error::Result;
use crate::ir::{BinOp, UnOp};
use crate::lazy::Lazy;
use crate::program::Program;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum ActKind {
    Sigmoid,
    Tanh,
    Relu,
    LeakyRelu,
    ThresholdedRelu,
    ScaledTanh,
    HardSigmoid,
    Elu,
    Softsign,
    Softplus,
    Affine,
}

/// One activation function with its parameters.
#[derive(Clone, Copy, Debug)]
pub(super) struct Act {
    pub(super) kind: ActKind,
    pub(super) alpha: f64,
    pub(super) beta: f64,
}

pub(super) fn apply(p: &mut Program, a: Act, x: &Lazy) -> Lazy {
    match a.kind {
        ActKind::Sigmoid => sigmoid(p, x),
        ActKind::Tanh => p.unary(UnOp::Tanh, x),
        ActKind::Relu => with(p, BinOp::Max, x, 0.0),
        ActKind::LeakyRelu | ActKind::ThresholdedRelu | ActKind::Elu => {
            let zero = konst(p, x, 0.0);
            let (cond, neg) = match a.kind {
                ActKind::LeakyRelu => (p.binary(BinOp::Lt, &zero, x), with(p, BinOp::Mul, x, a.alpha)),
                ActKind::ThresholdedRelu => {
                    let t = konst(p, x, a.alpha);
                    (p.binary(BinOp::Lt, &t, x), zero.clone())
                }
                _ => {
                    let e = p.unary(UnOp::Exp, x);
                    let e1 = with(p, BinOp::Sub, &e, 1.0);
                    (p.binary(BinOp::Lt, &zero, x), with(p, BinOp::Mul, &e1, a.alpha))
                }
            };
            p.where_(&cond, x, &neg)
        }
        ActKind::ScaledTanh => {
            let s = with(p, BinOp::Mul, x, a.beta);
            let t = p.unary(UnOp::Tanh, &s);
            with(p, BinOp::Mul, &t, a.alpha)
        }
        ActKind::HardSigmoid => {
            let s = with(p, BinOp::Mul, x, a.alpha);
            let s = with(p, BinOp::Add, &s, a.beta);
            let s = with(p, BinOp::Max, &s, 0.0);
            with(p, BinOp::Min, &s, 1.0)
        }
        ActKind::Softsign => {
            let d = p.unary(UnOp::Abs, x);
            let d = with(p, BinOp::Add, &d, 1.0);
            p.binary(BinOp::Div, x, &d)
        }
        ActKind::Softplus => {
            let e = p.unary(UnOp::Exp, x);
            let e1 = with(p, BinOp::Add, &e, 1.0);
            p.unary(UnOp::Log, &e1)
        }
        ActKind::Affine => {
            let s = with(p, BinOp::Mul, x, a.alpha);
            with(p, BinOp::Add, &s, a.beta)
        }
    }
}

/// The activations of each direction (`per_dir` functions each), from the `activations`,
/// `activation_alpha` and `activation_beta` attributes or the defaults.
pub(super) fn activations(c: &NodeCtx<'_>, defaults: &[&str], dirs: usize) -> Result<Vec<Vec<Act>>> {
    let names: Vec<String> = match c.node.attr("activations") {
        Some(crate::onnx::Attr::Strs(v)) => v.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect(),
        Some(_) => return Err(c.err("attribute `activations` is not a list of strings")),
        None => (0..dirs).flat_map(|_| defaults.iter().map(|s| s.to_string())).collect(),
    };
    let per = defaults.len();
    if names.len() != per * dirs {
        return Err(
            c.err(format!("{} activations given, {per} per direction expected for {dirs} direction(s)", names.len()))
        );
    }
    let alphas = c.node.attr_floats("activation_alpha").unwrap_or(&[]).to_vec();
    let betas = c.node.attr_floats("activation_beta").unwrap_or(&[]).to_vec();
    let (mut ai, mut bi) = (alphas.iter(), betas.iter());
    let mut out = Vec::new();
    for name in &names {
        // (kind, default alpha, default beta, uses alpha, uses beta)
        let (kind, da, db, ua, ub) = match name.to_ascii_lowercase().as_str() {
            "sigmoid" => (ActKind::Sigmoid, 0.0, 0.0, false, false),
            "tanh" => (ActKind::Tanh, 0.0, 0.0, false, false),
            "relu" => (ActKind::Relu, 0.0, 0.0, false, false),
            "leakyrelu" => (ActKind::LeakyRelu, 0.01, 0.0, true, false),
            "thresholdedrelu" => (ActKind::ThresholdedRelu, 1.0, 0.0, true, false),
            "scaledtanh" => (ActKind::ScaledTanh, 1.0, 1.0, true, true),
            "hardsigmoid" => (ActKind::HardSigmoid, 0.2, 0.5, true, true),
            "elu" => (ActKind::Elu, 1.0, 0.0, true, false),
            "softsign" => (ActKind::Softsign, 0.0, 0.0, false, false),
            "softplus" => (ActKind::Softplus, 0.0, 0.0, false, false),
            "affine" => (ActKind::Affine, 1.0, 0.0, true, true),
            _ => return Err(c.err(format!("unsupported activation `{name}`"))),
        };
        let alpha = if ua { ai.next().map_or(da, |&v| v as f64) } else { da };
        let beta = if ub { bi.next().map_or(db, |&v| v as f64) } else { db };
        out.push(Act { kind, alpha, beta });
    }
    Ok(out.chunks(per).map(<[Act]>::to_vec).collect())
}
