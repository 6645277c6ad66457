//! Matrix products that share a constant right operand and do not depend on each other, computed
//! as one product on the CPU target (TVM's `CombineParallelDense`): a recurrent cell unrolled over
//! time multiplies every step's input by the same weight, and batch-1 products read their weight
//! from memory once per row block, so `k` products of one row each read it `k` times where one
//! product of `k` rows reads it once. `policy_full`'s four input projections read 6.3 MB each.
//!
//! [`plan`] finds the groups and orders the graph so that each group's members are consecutive
//! (every input of every member computed before the first); [`lower`] stacks the members' left
//! operands, multiplies once into a buffer and hands each member its rows. A group whose operands
//! turn out unequal in shape or type, or too many rows, is lowered member by member as before.

use std::collections::{BinaryHeap, HashMap, HashSet};

use pilot_core::DType;

use crate::error::Result;
use crate::lazy::Lazy;
use crate::onnx::Graph;
use crate::program::BufKind;

use super::{nn, shape, Lowerer, NodeCtx};

/// Right operands below this many bytes stay in the caches between products: nothing to save.
pub const MIN_WEIGHT_BYTES: usize = 256 << 10;

/// Rows of all members together above which the products are left alone: the weight's reads are
/// then shared by the rows of each product already.
pub const MAX_ROWS: usize = 16;

/// The groups of `g` (each a list of node indices, ascending, at least two) and `g` reordered so
/// that each group's members follow one another; `None` when there is no group (then `g` stays
/// as it is). Members are `MatMul` nodes whose right operand is the same float32 matrix initializer
/// of at least [`MIN_WEIGHT_BYTES`], none computed from another's output.
pub fn plan(g: &Graph) -> Option<(Graph, Vec<Vec<usize>>)> {
    let weights: HashMap<&str, &crate::tensor::Tensor> = g.initializers.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut by_weight: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let shared = n.op_type == "MatMul"
            && n.domain.is_empty()
            && n.inputs.len() == 2
            && weights
                .get(n.inputs[1].as_str())
                .is_some_and(|t| t.dtype == DType::F32 && t.shape.len() == 2 && t.numel() * 4 >= MIN_WEIGHT_BYTES);
        if shared {
            by_weight.entry(n.inputs[1].as_str()).or_default().push(i);
        }
    }
    if by_weight.values().all(|m| m.len() < 2) {
        return None;
    }
    let deps = dependencies(g)?;
    let ancestors = ancestors(&deps);
    let reaches = |a: usize, b: usize| ancestors[b][a / 64] >> (a % 64) & 1 == 1;
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for members in by_weight.into_values() {
        let mut group: Vec<usize> = Vec::new();
        for m in members {
            if group.iter().all(|&o| !reaches(o, m) && !reaches(m, o)) {
                group.push(m);
            }
        }
        if group.len() >= 2 {
            groups.push(group);
        }
    }
    if groups.is_empty() {
        return None;
    }
    groups.sort();
    let order = merged_order(&deps, &groups);
    let mut reordered = g.clone();
    reordered.nodes = order.iter().map(|&i| g.nodes[i].clone()).collect();
    let position: HashMap<usize, usize> = order.iter().enumerate().map(|(at, &i)| (i, at)).collect();
    let groups = groups.iter().map(|m| m.iter().map(|i| position[i]).collect()).collect();
    Some((reordered, groups))
}

/// Per node, the nodes computing its inputs (captured ones included); `None` if a node reads a
/// value computed by a node after it (not in topological order: left to the lowering's error).
fn dependencies(g: &Graph) -> Option<Vec<Vec<usize>>> {
    let producer: HashMap<&str, usize> =
        g.nodes.iter().enumerate().flat_map(|(i, n)| n.outputs.iter().map(move |o| (o.as_str(), i))).collect();
    let mut deps = Vec::with_capacity(g.nodes.len());
    for (i, n) in g.nodes.iter().enumerate() {
        let mut d: Vec<usize> = Vec::new();
        for input in n.inputs.iter().chain(&n.captured()) {
            if let Some(&p) = producer.get(input.as_str()) {
                if p >= i {
                    return None;
                }
                d.push(p);
            }
        }
        d.sort_unstable();
        d.dedup();
        deps.push(d);
    }
    Some(deps)
}

/// Per node, a bit set of the nodes it is computed from (directly or not).
fn ancestors(deps: &[Vec<usize>]) -> Vec<Vec<u64>> {
    let words = deps.len().div_ceil(64);
    let mut sets: Vec<Vec<u64>> = Vec::with_capacity(deps.len());
    for d in deps {
        let mut set = vec![0u64; words];
        for &p in d {
            set[p / 64] |= 1 << (p % 64);
            for (w, &a) in set.iter_mut().zip(&sets[p]) {
                *w |= a;
            }
        }
        sets.push(set);
    }
    sets
}

/// A topological order of the nodes in which each group's members are consecutive: the group is
/// one node for the sort, taken as early as the original order allows (ties by smallest index).
/// No cycle can form: no member is computed from another's output.
fn merged_order(deps: &[Vec<usize>], groups: &[Vec<usize>]) -> Vec<usize> {
    let n = deps.len();
    let mut unit: Vec<usize> = (0..n).collect();
    for g in groups {
        for &m in g {
            unit[m] = g[0];
        }
    }
    let members = |u: usize| groups.iter().find(|g| g[0] == u).cloned().unwrap_or_else(|| vec![u]);
    let mut waiting = vec![0usize; n];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, d) in deps.iter().enumerate() {
        let mut seen = HashSet::new();
        for &p in d {
            if unit[p] != unit[i] && seen.insert(unit[p]) {
                waiting[unit[i]] += 1;
                users[unit[p]].push(unit[i]);
            }
        }
    }
    let mut ready: BinaryHeap<std::cmp::Reverse<usize>> =
        (0..n).filter(|&u| unit[u] == u && waiting[u] == 0).map(std::cmp::Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(std::cmp::Reverse(u)) = ready.pop() {
        order.extend(members(u));
        for &v in &users[u] {
            waiting[v] -= 1;
            if waiting[v] == 0 {
                ready.push(std::cmp::Reverse(v));
            }
        }
    }
    debug_assert_eq!(order.len(), n, "merging independent products leaves the graph acyclic");
    order
}

/// The members' outputs computed as one product, or `None` where the group does not batch (its
/// left operands differ in shape or type, are not float32, or have more than [`MAX_ROWS`] rows in
/// all): the caller then lowers each member alone.
pub(super) fn lower(l: &mut Lowerer, g: &Graph, members: &[usize]) -> Result<Option<Vec<Lazy>>> {
    let Some(lefts) = members.iter().map(|&i| l.values.get(&g.nodes[i].inputs[0]).cloned()).collect::<Option<Vec<_>>>()
    else {
        return Ok(None);
    };
    let Some(b) = l.values.get(&g.nodes[members[0]].inputs[1]).cloned() else { return Ok(None) };
    let first = &lefts[0];
    let k = b.shape[0];
    let same = lefts.iter().all(|a| a.shape == first.shape && a.dtype == DType::F32);
    if !same || first.rank() == 0 || first.shape[first.rank() - 1] != k {
        return Ok(None);
    }
    let rows = first.numel() / k;
    if rows * lefts.len() > MAX_ROWS {
        return Ok(None);
    }
    let node = &g.nodes[members[0]];
    let mut c = NodeCtx { l, node };
    let flat: Vec<Lazy> = lefts.iter().map(|a| c.p().reshape(a, &[rows, k])).collect();
    let stacked = shape::concat_lazy(&mut c, &flat, 0)?;
    let stacked = c.p().realize(&stacked, BufKind::Scratch, &format!("{}_rows", node.name));
    let product = nn::matmul_lazy(&mut c, &stacked, &b)?;
    let product = c.p().realize(&product, BufKind::Scratch, &node.name);
    let n = b.shape[1];
    let mut out_shape = first.shape.clone();
    *out_shape.last_mut().expect("rank checked above") = n;
    let outs = (0..lefts.len())
        .map(|j| {
            let p = c.p();
            let part = p.slice(&product, &[(j * rows) as i64, 0], &[1, 1], &[rows, n]);
            p.reshape(&part, &out_shape)
        })
        .collect();
    Ok(Some(outs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::Node;
    use crate::tensor::Tensor;

    fn graph(nodes: Vec<Node>, k: usize) -> Graph {
        Graph {
            name: "g".into(),
            nodes,
            inputs: Vec::new(),
            outputs: Vec::new(),
            initializers: vec![("w".into(), Tensor::from_f32(vec![k, k], &vec![0.5; k * k]))],
            value_info: Vec::new(),
        }
    }

    fn outputs(g: &Graph) -> Vec<&str> {
        g.nodes.iter().map(|n| n.outputs[0].as_str()).collect()
    }

    #[test]
    fn independent_products_of_one_weight_are_grouped_and_made_consecutive() {
        // y2 reads y0's result through t: not in y0's group. y1 and y3 are independent of y0.
        let g = graph(
            vec![
                Node::plain("MatMul", &["a0", "w"], "y0"),
                Node::plain("Tanh", &["y0"], "t"),
                Node::plain("MatMul", &["t", "w"], "y2"),
                Node::plain("Neg", &["a1"], "b1"),
                Node::plain("MatMul", &["b1", "w"], "y1"),
                Node::plain("MatMul", &["a3", "w"], "y3"),
            ],
            256,
        );
        let (reordered, groups) = plan(&g).expect("a group");
        assert_eq!(outputs(&reordered), ["b1", "y0", "y1", "y3", "t", "y2"]);
        assert_eq!(groups, [vec![1, 2, 3]]);
    }

    #[test]
    fn chains_lone_products_and_small_weights_are_left_alone() {
        let chain = vec![
            Node::plain("MatMul", &["h0", "w"], "h1"),
            Node::plain("MatMul", &["h1", "w"], "h2"),
            Node::plain("Tanh", &["h2"], "t"),
            Node::plain("MatMul", &["t", "w"], "h3"),
        ];
        assert!(plan(&graph(chain, 256)).is_none(), "each product reads the one before");
        let two = vec![Node::plain("MatMul", &["a0", "w"], "y0"), Node::plain("MatMul", &["a1", "w"], "y1")];
        assert!(plan(&graph(two.clone(), 256)).is_some());
        assert!(plan(&graph(two, 128)).is_none(), "a 64 KiB weight stays in the caches");
    }
}
