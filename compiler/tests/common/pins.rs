//! Which inputs of an ONNX backend node case are pinned at compile time (`--const`): exactly the graph
//! inputs the model uses as shapes, axes, counts or bounds, decided by the consuming op's input
//! position (never by the case's name), and traced back through the nodes that compute such a value.
//! Everything else is fed at run time.
#![allow(dead_code)] // several test binaries share `common`, each using part of it

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use pilot_compiler::lower::pin::Pins;
use pilot_compiler::onnx::{Attr, Graph, Model, Node};

use super::read_pb;

/// The inputs ONNX defines as shapes, axes, counts, bounds or mode switches, by op and position. These
/// decide output shapes or the computation's structure, so an ahead-of-time compiler needs them at
/// compile time. Inputs pilot computes with at run time are not listed, so they stay run-time inputs:
/// data (Clip bounds, RNN `sequence_lens`, optimizer step counts, Gather indices) and scalars that
/// shape nothing (Trilu `k`).
pub const SHAPE_INPUTS: &[(&str, &[usize])] = &[
    ("AffineGrid", &[1]),            // size
    ("BlackmanWindow", &[0]),        // size
    ("CenterCropPad", &[1]),         // shape
    ("Col2Im", &[1, 2]),             // image_shape, block_shape
    ("Compress", &[1]),              // condition: which slices the output keeps
    ("ConstantOfShape", &[0]),       // shape
    ("CumSum", &[1]),                // axis
    ("DFT", &[1, 2]),                // dft_length, axis
    ("Dropout", &[1, 2]),            // ratio, training_mode (training draws its mask at compile time)
    ("Expand", &[1]),                // shape
    ("HammingWindow", &[0]),         // size
    ("HannWindow", &[0]),            // size
    ("MaxUnpool", &[2]),             // output_shape
    ("MelWeightMatrix", &[0, 1, 2]), // num_mel_bins, dft_length, sample_rate
    ("OneHot", &[1]),                // depth
    ("Pad", &[1, 2, 3]),             // pads, constant_value, axes
    ("Range", &[0, 1, 2]),           // start, limit, delta
    ("ReduceL1", &[1]),              // axes (all reductions)
    ("ReduceL2", &[1]),
    ("ReduceLogSum", &[1]),
    ("ReduceLogSumExp", &[1]),
    ("ReduceMax", &[1]),
    ("ReduceMean", &[1]),
    ("ReduceMin", &[1]),
    ("ReduceProd", &[1]),
    ("ReduceSum", &[1]),
    ("ReduceSumSquare", &[1]),
    ("Reshape", &[1]),        // shape
    ("Resize", &[1, 2, 3]),   // roi, scales, sizes
    ("STFT", &[2, 3]),        // frame_step, frame_length
    ("Slice", &[1, 2, 3, 4]), // starts, ends, axes, steps
    ("Split", &[1]),          // split sizes
    ("Squeeze", &[1]),        // axes
    ("Tile", &[1]),           // repeats
    ("TopK", &[1]),           // k
    ("Unsqueeze", &[1]),      // axes
    ("Upsample", &[1]),       // scales
];

/// Op inputs of which only the shape or element type is used: tracing stops there.
const NOT_VALUES: &[(&str, usize)] = &[("Shape", 0), ("Size", 0), ("CastLike", 1), ("EyeLike", 0)];

/// The names of the graph inputs of `model` to pin: those feeding a [`SHAPE_INPUTS`] position,
/// directly or through the nodes computing it (not through [`NOT_VALUES`] inputs).
/// Nodes in subgraphs (If branches, Loop and Scan bodies) count as the graph's own: a branch's
/// Reshape seeds the search, and a node's subgraphs read the outer values it captures.
pub fn shape_input_names(model: &Model) -> BTreeSet<String> {
    let g = &model.graph;
    let mut nodes: Vec<&Node> = Vec::new();
    flatten(g, &mut nodes);
    let producer: HashMap<&str, &Node> =
        nodes.iter().flat_map(|&n| n.outputs.iter().map(move |o| (o.as_str(), n))).collect();
    let table: HashMap<&str, &[usize]> = SHAPE_INPUTS.iter().copied().collect();
    let mut todo: Vec<String> = Vec::new();
    for n in nodes.iter().filter(|n| n.domain.is_empty() || n.domain == "ai.onnx") {
        for &i in table.get(n.op_type.as_str()).copied().unwrap_or_default() {
            todo.extend(n.inputs.get(i).filter(|s| !s.is_empty()).cloned());
        }
    }
    let inputs: BTreeSet<&str> = g.real_inputs().map(|v| v.name.as_str()).collect();
    let (mut seen, mut pinned) = (BTreeSet::new(), BTreeSet::new());
    while let Some(v) = todo.pop() {
        if inputs.contains(v.as_str()) {
            pinned.insert(v.clone());
        } else if let Some(n) = producer.get(v.as_str()).filter(|_| !seen.contains(&v)) {
            let traced = |&(i, s): &(usize, &String)| !s.is_empty() && !NOT_VALUES.contains(&(n.op_type.as_str(), i));
            todo.extend(n.inputs.iter().enumerate().filter(traced).map(|(_, s)| s.clone()));
            todo.extend(n.captured());
        }
        seen.insert(v);
    }
    pinned
}

fn flatten<'g>(g: &'g Graph, out: &mut Vec<&'g Node>) {
    for n in &g.nodes {
        out.push(n);
        for (_, a) in &n.attrs {
            match a {
                Attr::Graph(sub) => flatten(sub, out),
                Attr::Graphs(subs) => subs.iter().for_each(|sub| flatten(sub, out)),
                _ => {}
            }
        }
    }
}

/// One data set of a case split for compilation: the pinned values, and the indices (into the
/// graph's real inputs, i.e. `input_J.pb`) of the inputs fed at run time, in order.
pub fn split_inputs(model: &Model, set: &Path) -> (Pins, Vec<usize>) {
    let pinned = shape_input_names(model);
    let mut pins = Pins::new();
    let mut runtime = Vec::new();
    for (j, vi) in model.graph.real_inputs().enumerate() {
        let file = set.join(format!("input_{j}.pb"));
        if pinned.contains(&vi.name) && file.exists() {
            pins.insert(vi.name.clone(), read_pb(&file));
        } else {
            runtime.push(j);
        }
    }
    (pins, runtime)
}
