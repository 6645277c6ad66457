//! Per-channel affine chains folded into the convolution before them, as onnxruntime's graph
//! optimizer does (`ConvBNFusion`, `ConvMulFusion`, `ConvAddFusion`): an inference-mode
//! `BatchNormalization`, a `Mul` by a per-channel (or scalar) constant, or an `Add` of one, whose
//! input is a `Conv` with constant weights read by nothing else, becomes new weights and bias of
//! that convolution. The convolution then runs with no epilogue for them; the outputs differ from
//! the unfolded graph only by float32 rounding (the new weights are computed in float64, rounded
//! once).

use std::collections::HashMap;

use pilot_core::DType;

use crate::onnx::{Attr, Graph, Node};
use crate::tensor::Tensor;

/// `g` with every foldable chain folded (repeatedly: `Conv → BatchNormalization → Mul → Add` folds
/// whole). Returns `g` unchanged (cloned) when nothing folds.
pub fn fold(g: &Graph) -> Graph {
    let mut g = g.clone();
    while fold_one(&mut g) {}
    g
}

/// Every value name a node of `g` or of its subgraphs reads, with its count.
fn count_uses(g: &Graph, uses: &mut HashMap<String, usize>) {
    for n in &g.nodes {
        for i in n.inputs.iter().filter(|i| !i.is_empty()) {
            *uses.entry(i.clone()).or_default() += 1;
        }
        for (_, a) in &n.attrs {
            match a {
                Attr::Graph(sub) => count_uses(sub, uses),
                Attr::Graphs(subs) => subs.iter().for_each(|s| count_uses(s, uses)),
                _ => {}
            }
        }
    }
}

/// The float32 initializer named `name`.
fn weight<'a>(g: &'a Graph, name: &str) -> Option<&'a Tensor> {
    g.initializers.iter().find(|(n, t)| n == name && t.dtype == DType::F32).map(|(_, t)| t)
}

/// The per-output-channel values of a constant that broadcasts against a `[n, c, spatial...]`
/// output of rank `rank` without growing it: a scalar, or `[c, 1, ...]` with `rank - 2` trailing ones
/// (leading ones allowed).
fn per_channel(t: &Tensor, c: usize, rank: usize) -> Option<Vec<f64>> {
    let v = t.to_f64();
    if t.numel() == 1 && t.shape.len() <= rank {
        return Some(vec![v[0]; c]);
    }
    let dims: Vec<usize> = t.shape.iter().copied().skip_while(|&d| d == 1).collect();
    let channel_last = t.shape.len() >= rank - 1 && t.shape.len() <= rank;
    (channel_last && dims.len() == rank - 1 && dims[0] == c && dims[1..].iter().all(|&d| d == 1)).then_some(v)
}

/// Folds the first chain found; whether one was.
fn fold_one(g: &mut Graph) -> bool {
    let mut uses = HashMap::new();
    count_uses(g, &mut uses);
    for o in &g.outputs {
        *uses.entry(o.name.clone()).or_default() += 1;
    }
    for ci in 0..g.nodes.len() {
        let conv = &g.nodes[ci];
        if conv.op_type != "Conv" || !conv.domain.is_empty() || conv.outputs.len() != 1 {
            continue;
        }
        let y = &conv.outputs[0];
        if uses.get(y) != Some(&1) {
            continue;
        }
        let Some(w) = conv.inputs.get(1).and_then(|n| weight(g, n)) else { continue };
        if w.shape.len() < 3 {
            continue;
        }
        let c = w.shape[0];
        let bias: Vec<f64> = match conv.inputs.get(2).filter(|n| !n.is_empty()) {
            Some(n) => match weight(g, n) {
                Some(b) if b.numel() == c => b.to_f64(),
                _ => continue,
            },
            None => vec![0.0; c],
        };
        let Some(ni) = g.nodes.iter().position(|n| n.inputs.first() == Some(y)) else { continue };
        let Some((scale, shift)) = affine(g, &g.nodes[ni], c, w.shape.len()) else { continue };
        let per = w.numel() / c;
        let wv = w.to_f64();
        let new_w: Vec<f64> = (0..wv.len()).map(|i| wv[i] * scale[i / per]).collect();
        let new_b: Vec<f64> = (0..c).map(|o| bias[o] * scale[o] + shift[o]).collect();
        let (w_shape, out) = (w.shape.clone(), g.nodes[ni].outputs[0].clone());
        let base = g.nodes[ci].name.clone();
        let wname = fresh(g, &format!("{base}__folded_w"));
        let bname = fresh(g, &format!("{base}__folded_b"));
        g.initializers.push((wname.clone(), Tensor::from_f64(DType::F32, w_shape, &new_w)));
        g.initializers.push((bname.clone(), Tensor::from_f64(DType::F32, vec![c], &new_b)));
        let conv = &mut g.nodes[ci];
        conv.inputs.truncate(1);
        conv.inputs.extend([wname, bname]);
        conv.outputs = vec![out];
        g.nodes.remove(ni);
        return true;
    }
    false
}

/// `(scale, shift)` per output channel when `n`, reading a convolution's output of `c` channels and
/// rank `rank` as its first input, computes `x · scale + shift` per channel with constants.
fn affine(g: &Graph, n: &Node, c: usize, rank: usize) -> Option<(Vec<f64>, Vec<f64>)> {
    if !n.domain.is_empty() || n.outputs.is_empty() {
        return None;
    }
    match n.op_type.as_str() {
        "BatchNormalization" => {
            if n.attr_int("training_mode").unwrap_or(0) != 0 || n.outputs.iter().skip(1).any(|o| !o.is_empty()) {
                return None;
            }
            let p: Vec<Vec<f64>> = (1..5)
                .map(|i| {
                    n.inputs.get(i).and_then(|name| weight(g, name)).filter(|t| t.numel() == c).map(Tensor::to_f64)
                })
                .collect::<Option<_>>()?;
            let eps = n.attr_float("epsilon").unwrap_or(1e-5) as f64;
            let scale: Vec<f64> = (0..c).map(|o| p[0][o] / (p[3][o] + eps).sqrt()).collect();
            let shift = (0..c).map(|o| p[1][o] - p[2][o] * scale[o]).collect();
            Some((scale, shift))
        }
        "Mul" | "Add" if n.inputs.len() == 2 && n.outputs.len() == 1 => {
            let v = per_channel(weight(g, &n.inputs[1])?, c, rank)?;
            Some(if n.op_type == "Mul" { (v, vec![0.0; c]) } else { (vec![1.0; c], v) })
        }
        _ => None,
    }
}

/// `base`, or `base` with a number appended, that no initializer or node output uses.
fn fresh(g: &Graph, base: &str) -> String {
    let taken = |s: &str| {
        g.initializers.iter().any(|(n, _)| n == s) || g.nodes.iter().any(|n| n.outputs.iter().any(|o| o == s))
    };
    (0..).map(|i| if i == 0 { base.to_string() } else { format!("{base}{i}") }).find(|s| !taken(s)).expect("unbounded")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::ValueInfo;

    fn node(op: &str, inputs: &[&str], out: &str) -> Node {
        Node {
            name: format!("{op}_{out}"),
            op_type: op.into(),
            domain: String::new(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: vec![out.into()],
            attrs: vec![],
        }
    }

    fn graph(nodes: Vec<Node>, inits: Vec<(&str, Vec<usize>, Vec<f64>)>, outputs: &[&str]) -> Graph {
        Graph {
            name: "g".into(),
            nodes,
            inputs: vec![],
            outputs: outputs.iter().map(|o| ValueInfo { name: o.to_string(), dtype: None, dims: None }).collect(),
            initializers: inits
                .into_iter()
                .map(|(n, s, v)| (n.to_string(), Tensor::from_f64(DType::F32, s, &v)))
                .collect(),
            value_info: vec![],
        }
    }

    #[test]
    fn batch_norm_then_mul_then_add_fold_into_the_convolution() {
        let g = graph(
            vec![
                node("Conv", &["x", "w", "b"], "c"),
                node("BatchNormalization", &["c", "s", "t", "m", "v"], "n"),
                node("Mul", &["n", "k"], "p"),
                node("Add", &["p", "a"], "y"),
            ],
            vec![
                ("w", vec![2, 1, 1, 1], vec![2.0, 3.0]),
                ("b", vec![2], vec![1.0, -1.0]),
                ("s", vec![2], vec![1.0, 2.0]),
                ("t", vec![2], vec![0.5, 0.0]),
                ("m", vec![2], vec![1.0, 0.0]),
                ("v", vec![2], vec![4.0 - 1e-5, 1.0 - 1e-5]),
                ("k", vec![], vec![10.0]),
                ("a", vec![1, 2, 1, 1], vec![0.25, 0.75]),
            ],
            &["y"],
        );
        let f = fold(&g);
        assert_eq!(f.nodes.len(), 1, "{:?}", f.nodes);
        assert_eq!(f.nodes[0].outputs, vec!["y".to_string()]);
        let get = |name: &str| f.initializers.iter().find(|(n, _)| n == name).unwrap().1.to_f64();
        // Channel 0: ((2x + 1 - 1) / 2 + 0.5) * 10 + 0.25 = 10x + 5.25.
        // Channel 1: ((3x - 1) * 2 + 0) * 10 + 0.75 = 60x - 19.25.
        let (w, b) = (get(&f.nodes[0].inputs[1]), get(&f.nodes[0].inputs[2]));
        for (got, want) in w.iter().zip([10.0, 60.0]).chain(b.iter().zip([5.25, -19.25])) {
            assert!((got - want).abs() < 1e-4, "{got} vs {want}");
        }
        assert_eq!(get("w"), vec![2.0, 3.0], "the original weights stay for other readers");
    }

    #[test]
    fn a_convolution_output_read_twice_or_a_non_channel_constant_does_not_fold() {
        let inits = || {
            vec![
                ("w", vec![2, 1, 1, 1], vec![2.0, 3.0]),
                ("k", vec![2], vec![1.0, 2.0]),
                ("k2", vec![2, 1, 1], vec![1.0, 2.0]),
            ]
        };
        // `c` is also a graph output.
        let shared = graph(vec![node("Conv", &["x", "w"], "c"), node("Mul", &["c", "k2"], "y")], inits(), &["y", "c"]);
        assert_eq!(fold(&shared).nodes.len(), 2);
        // `[2]` broadcasts along the last (spatial) axis, not the channels.
        let along_w = graph(vec![node("Conv", &["x", "w"], "c"), node("Mul", &["c", "k"], "y")], inits(), &["y"]);
        assert_eq!(fold(&along_w).nodes.len(), 2);
        // A run-time second operand.
        let dynamic = graph(vec![node("Conv", &["x", "w"], "c"), node("Add", &["c", "z"], "y")], inits(), &["y"]);
        assert_eq!(fold(&dynamic).nodes.len(), 2);
        let ok = graph(vec![node("Conv", &["x", "w"], "c"), node("Mul", &["c", "k2"], "y")], inits(), &["y"]);
        assert_eq!(fold(&ok).nodes.len(), 1);
    }
}
