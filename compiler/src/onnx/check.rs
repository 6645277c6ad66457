//! The model-level checks the reference tools make before running a model (onnx's
//! `onnx/checker.cc` `check_model`/`check_graph`, onnxruntime's `Model::Model` and
//! `model_load_utils::ValidateOpsetForDomain`), as one-line errors naming the node at fault.
//!
//! - IR version: set and at most [`MAX_IR_VERSION`] (onnxruntime 1.2x: "Unsupported model IR
//!   version", "Missing model IR version"; the checker also refuses 0).
//! - Opsets: the default domain from 1 to [`MAX_OPSET`] (onnxruntime refuses opsets past its
//!   release's as "under development"; no operator is registered for opset 0); other domains at
//!   least 1.
//! - Graph: at least one output (onnxruntime cannot build a session without one); every value has
//!   one producer — a graph input, an initializer or one node output (the checker's SSA rule,
//!   onnxruntime's "Duplicate definition of name").

use std::collections::HashMap;

use super::{Graph, ImportError, Model};

/// The newest IR version accepted (onnx 1.17+ `IR_VERSION`, onnxruntime 1.2x's maximum).
pub const MAX_IR_VERSION: i64 = 14;
/// The newest default-domain opset accepted (the last one onnxruntime 1.2x calls released).
pub const MAX_OPSET: i64 = 28;

/// Checks `m`; see the module documentation.
pub fn check(m: &Model) -> Result<(), ImportError> {
    if !(1..=MAX_IR_VERSION).contains(&m.ir_version) {
        let why = if m.ir_version == 0 { "is not set" } else { "is not supported" };
        return Err(ImportError::Invalid(format!(
            "model ir_version {} {why} (1 to {MAX_IR_VERSION} are)",
            m.ir_version
        )));
    }
    for (domain, version) in &m.opsets {
        let max = if domain.is_empty() { MAX_OPSET } else { i64::MAX };
        if !(1..=max).contains(version) {
            let shown = if domain.is_empty() { "ai.onnx" } else { domain };
            let range = if domain.is_empty() { format!("1 to {MAX_OPSET}") } else { "1 and up".into() };
            return Err(ImportError::Invalid(format!("opset {version} of domain {shown} is not supported ({range})")));
        }
    }
    check_graph(&m.graph)
}

/// Where a value comes from, for error messages.
enum Producer {
    Input,
    Initializer,
    Node(usize),
}

fn check_graph(g: &Graph) -> Result<(), ImportError> {
    if g.outputs.is_empty() {
        return Err(ImportError::Invalid(format!(
            "graph {:?} has no outputs ({} nodes): there is nothing to compute",
            g.name,
            g.nodes.len()
        )));
    }
    let mut producers: HashMap<&str, Producer> = HashMap::new();
    for (name, _) in &g.initializers {
        producers.insert(name, Producer::Initializer);
    }
    for v in &g.inputs {
        // An input that repeats an initializer is how IR < 4 exporters declare constants.
        producers.entry(&v.name).or_insert(Producer::Input);
    }
    for (i, n) in g.nodes.iter().enumerate() {
        for out in n.outputs.iter().filter(|o| !o.is_empty()) {
            if let Some(first) = producers.insert(out, Producer::Node(i)) {
                let by = match first {
                    Producer::Input => "a graph input".to_string(),
                    Producer::Initializer => "an initializer".to_string(),
                    Producer::Node(j) => format!("node `{}` ({})", g.nodes[j].name, g.nodes[j].op_type),
                };
                return Err(ImportError::Invalid(format!(
                    "node `{}` ({}): output `{out}` is already produced by {by}",
                    n.name, n.op_type
                )));
            }
        }
    }
    Ok(())
}
