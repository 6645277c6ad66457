//! Values whose reads rejoin: read by several nodes, each on a chain of elementwise nodes that
//! meets the others at one node (a diamond, such as `z` in a GRU's `(1 - z)·n + z·h`, or `x` in
//! `x·sigmoid(x)`). Left unrealized, such a value is computed once per element in the kernel of the
//! node where its chains meet (expressions are shared, so both reads are one computation there);
//! realized, it costs a kernel and a round trip through memory. A read that broadcasts it to a
//! larger shape realizes it anyway (`crate::lazy::Program::expand`), so nothing is recomputed.

use std::collections::{HashMap, HashSet};

use crate::onnx::Graph;

/// Operators lowered as one elementwise expression of their inputs.
const ELEMENTWISE: &[&str] = &[
    "Abs",
    "Add",
    "Cast",
    "Clip",
    "Div",
    "Elu",
    "Erf",
    "Exp",
    "HardSigmoid",
    "HardSwish",
    "Identity",
    "LeakyRelu",
    "Log",
    "Max",
    "Min",
    "Mul",
    "Neg",
    "Pow",
    "Reciprocal",
    "Relu",
    "Selu",
    "Sigmoid",
    "Softplus",
    "Sqrt",
    "Sub",
    "Tanh",
    "Where",
];

/// The values of `g` read more than once whose reads all rejoin at one elementwise node before
/// anything else reads them. A graph output is never among them.
pub fn rejoining(g: &Graph) -> HashSet<String> {
    let outputs: HashSet<&str> = g.outputs.iter().map(|o| o.name.as_str()).collect();
    let mut readers: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        for x in n.inputs.iter().filter(|x| !x.is_empty()) {
            readers.entry(x.as_str()).or_default().push(i);
        }
    }
    let elementwise = |i: usize| {
        let n = &g.nodes[i];
        n.domain.is_empty() && n.outputs.len() == 1 && ELEMENTWISE.contains(&n.op_type.as_str())
    };
    // The elementwise nodes from `start` on, each the only reader of the one before.
    let chain = |start: usize| -> HashSet<usize> {
        let mut out = HashSet::new();
        let mut at = start;
        while elementwise(at) && out.insert(at) {
            let o = g.nodes[at].outputs[0].as_str();
            match readers.get(o) {
                Some(r) if r.len() == 1 && !outputs.contains(o) => at = r[0],
                _ => break,
            }
        }
        out
    };
    readers
        .iter()
        .filter(|(v, r)| r.len() > 1 && !outputs.contains(*v))
        .filter(|(_, r)| {
            let mut chains = r.iter().map(|&i| chain(i));
            let first = chains.next().unwrap_or_default();
            let common = chains.fold(first, |acc, c| acc.intersection(&c).copied().collect());
            !common.is_empty()
        })
        .map(|(v, _)| v.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::{Node, ValueInfo};

    fn graph(nodes: Vec<Node>, out: &str) -> Graph {
        Graph {
            name: "g".into(),
            nodes,
            inputs: vec![],
            outputs: vec![ValueInfo { name: out.into(), dtype: None, dims: None }],
            initializers: vec![],
            value_info: vec![],
        }
    }

    #[test]
    fn a_gru_update_gate_rejoins_where_its_two_products_are_added() {
        let g = graph(
            vec![
                Node::plain("MatMul", &["x", "w"], "g"),
                Node::plain("Sigmoid", &["g"], "z"),
                Node::plain("Sub", &["one", "z"], "zc"),
                Node::plain("Mul", &["zc", "n"], "a"),
                Node::plain("Mul", &["z", "h"], "b"),
                Node::plain("Add", &["a", "b"], "h2"),
                Node::plain("MatMul", &["h2", "w"], "y"),
            ],
            "y",
        );
        assert_eq!(rejoining(&g), HashSet::from(["z".to_string()]));
    }

    #[test]
    fn reads_that_part_ways_or_end_outside_elementwise_chains_do_not_rejoin() {
        // Softmax-like: one read feeds a reduction, the other a division.
        let g = graph(
            vec![
                Node::plain("Exp", &["x"], "e"),
                Node::plain("ReduceSum", &["e"], "s"),
                Node::plain("Div", &["e", "s"], "y"),
            ],
            "y",
        );
        assert!(rejoining(&g).is_empty());
        // Two chains that never meet: each ends in a graph output or another reader.
        let g = graph(
            vec![
                Node::plain("Relu", &["x"], "a"),
                Node::plain("Sigmoid", &["x"], "b"),
                Node::plain("MatMul", &["a", "w"], "c"),
                Node::plain("Add", &["b", "c"], "y"),
            ],
            "y",
        );
        assert!(rejoining(&g).is_empty(), "`a` leaves the elementwise chain at a MatMul");
        // A graph output is realized whatever its readers.
        let g = graph(vec![Node::plain("Relu", &["x"], "y"), Node::plain("Mul", &["y", "y"], "z")], "y");
        assert!(rejoining(&g).is_empty());
    }

    #[test]
    fn swish_rejoins_at_its_product() {
        let g = graph(
            vec![
                Node::plain("Conv", &["i", "w"], "x"),
                Node::plain("Sigmoid", &["x"], "s"),
                Node::plain("Mul", &["x", "s"], "y"),
            ],
            "y",
        );
        assert_eq!(rejoining(&g), HashSet::from(["x".to_string()]));
    }
}
