//! Models that onnxruntime refuses must be refused by pilot too, with one line naming the node:
//! each case here was once compiled without complaint (or crashed the compiler).

use std::collections::HashMap;

use pilot_compiler::lower::budget::Limits;
use pilot_compiler::lower::Lowered;
use pilot_compiler::onnx::proto as pb;
use pilot_compiler::CompileError;

#[allow(dead_code)] // the helpers this file does not use (`close`, `read_pb`, ...)
mod common;

use common::proto::{floats, model_bytes, value};

fn ints(name: &str, dims: &[i64], v: &[i64]) -> pb::TensorProto {
    pb::TensorProto {
        name: Some(name.into()),
        data_type: Some(7),
        dims: dims.to_vec(),
        int64_data: v.to_vec(),
        ..Default::default()
    }
}

fn node(op: &str, inputs: &[&str], attrs: Vec<pb::AttributeProto>) -> pb::NodeProto {
    pb::NodeProto {
        name: Some(format!("the_{}", op.to_lowercase())),
        op_type: Some(op.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec!["y".into()],
        attribute: attrs,
        ..Default::default()
    }
}

fn attr_ints(name: &str, v: &[i64]) -> pb::AttributeProto {
    pb::AttributeProto { name: Some(name.into()), r#type: Some(7), ints: v.to_vec(), ..Default::default() }
}

fn attr_int(name: &str, v: i64) -> pb::AttributeProto {
    pb::AttributeProto { name: Some(name.into()), r#type: Some(2), i: Some(v), ..Default::default() }
}

/// Imports and lowers a one-node model over `x` of shape [1, 2, 4, 4].
fn lower(n: pb::NodeProto, inits: Vec<pb::TensorProto>) -> Result<(), CompileError> {
    lower_graph(vec![n], inits, &[1, 2, 4, 4], Limits::default()).map(|_| ())
}

/// Imports and lowers a model over `x` of shape `x_dims` whose output is `y`.
fn lower_graph(
    nodes: Vec<pb::NodeProto>,
    inits: Vec<pb::TensorProto>,
    x_dims: &[i64],
    limits: Limits,
) -> Result<Lowered, CompileError> {
    let graph = pb::GraphProto {
        node: nodes,
        input: vec![value("x", x_dims)],
        output: vec![value("y", &[])],
        initializer: inits,
        ..Default::default()
    };
    let model = pilot_compiler::onnx::load_bytes(&model_bytes(graph), None)?;
    pilot_compiler::lower::lower_limited(&model, &HashMap::new(), None, limits)
}

#[test]
fn node_checks_name_the_node() {
    let w = floats("w", &[2, 2, 1, 1], &[1.0; 4]);
    let cases: Vec<(pb::NodeProto, Vec<pb::TensorProto>, &str)> = vec![
        (
            node("Gather", &["x", "i"], vec![attr_int("axis", 3)]),
            vec![ints("i", &[2], &[0, 7])],
            "index 7 is out of range for axis 3 of size 4",
        ),
        (
            node("Gather", &["x", "i"], vec![attr_int("axis", 3)]),
            vec![ints("i", &[1], &[-5])],
            "index -5 is out of range",
        ),
        (node("Conv", &["x", "w"], vec![attr_int("group", 0)]), vec![w.clone()], "group 0: must be at least 1"),
        (node("Conv", &["x", "w"], vec![attr_int("group", -2)]), vec![w.clone()], "group -2"),
        (node("Conv", &["x", "w"], vec![attr_ints("strides", &[1, -1])]), vec![w], "strides [1, -1] has -1"),
        (node("MaxPool", &["x"], vec![attr_ints("kernel_shape", &[0, 0])]), vec![], "kernel_shape [0, 0] has 0"),
        (node("AveragePool", &["x"], vec![attr_ints("kernel_shape", &[2, -3])]), vec![], "kernel_shape [2, -3] has -3"),
        (node("Unsqueeze", &["x", "a"], vec![]), vec![ints("a", &[2], &[0, 0])], "axis 0 is repeated"),
        (node("Unsqueeze", &["x", "a"], vec![]), vec![ints("a", &[2], &[2, -4])], "axis 2 is repeated"),
        (
            node("Pad", &["x", "p"], vec![]),
            vec![ints("p", &[8], &[0, 0, 0, 0, 0, 0, 0, -5])],
            "pads 0/-5 make axis 3 of size 4 negative",
        ),
    ];
    for (n, inits, want) in cases {
        let op = n.op_type.clone().unwrap();
        let e = lower(n, inits).expect_err(want).to_string();
        assert!(
            e.contains(want) && e.starts_with(&format!("node `the_{}` ({op}", op.to_lowercase())),
            "{e:?} lacks {want:?}"
        );
        assert!(!e.contains('\n'));
    }
    // What stays valid: negative pads that leave the axis non-negative, in-range negative indices.
    lower(node("Pad", &["x", "p"], vec![]), vec![ints("p", &[8], &[0, 0, 0, 0, 0, 0, 0, -4])]).unwrap();
    lower(node("Gather", &["x", "i"], vec![attr_int("axis", 3)]), vec![ints("i", &[2], &[-4, 3])]).unwrap();
}

fn named(mut n: pb::NodeProto, name: &str, inputs: &[&str], output: &str) -> pb::NodeProto {
    n.name = Some(name.into());
    n.input = inputs.iter().map(|s| s.to_string()).collect();
    n.output = vec![output.into()];
    n
}

/// `y = x + ReduceSum(ConstantOfShape(shape))` (the sum folds to a constant, or is computed at run time).
fn sum_of_constant(shape: &[i64]) -> (Vec<pb::NodeProto>, Vec<pb::TensorProto>) {
    let fill = pb::AttributeProto {
        name: Some("value".into()),
        r#type: Some(4),
        t: Some(floats("", &[1], &[1.0])),
        ..Default::default()
    };
    let nodes = vec![
        named(node("ConstantOfShape", &[], vec![fill]), "ones", &["shape"], "ones"),
        named(node("ReduceSum", &[], vec![attr_int("keepdims", 0)]), "sum", &["ones"], "s"),
        named(node("Add", &[], vec![]), "add", &["x", "s"], "y"),
    ];
    (nodes, vec![ints("shape", &[shape.len() as i64], shape)])
}

#[test]
fn values_over_the_memory_limit_are_refused_before_allocating() {
    let big = 1i64 << 20;
    let (nodes, inits) = sum_of_constant(&[big, big]);
    let e = lower_graph(nodes, inits, &[1], Limits::default()).unwrap_err().to_string();
    assert_eq!(
        e,
        "node `ones` (ConstantOfShape, opset 17): output of shape [1048576, 1048576] needs 4096 GiB, \
         the limit is 16 GiB (--max-memory or PILOT_MAX_MEMORY)"
    );
    let range = named(node("Range", &[], vec![]), "r", &["start", "limit", "delta"], "y");
    let scalars = vec![ints("start", &[], &[0]), ints("limit", &[], &[1 << 40]), ints("delta", &[], &[1])];
    let e = lower_graph(vec![range], scalars, &[1], Limits::default()).unwrap_err().to_string();
    assert!(e.contains("(Range, opset 17): output of shape [1099511627776] needs 8192 GiB"), "{e}");
    let scales = vec![floats("roi", &[0], &[]), floats("scales", &[4], &[1.0, 1.0, 1e9, 1e9])];
    let resize = named(node("Resize", &[], vec![]), "up", &["x", "roi", "scales"], "y");
    let e = lower_graph(vec![resize], scales, &[1, 2, 4, 4], Limits::default()).unwrap_err().to_string();
    assert!(e.contains("(Resize, opset 17): output of shape [1, 2, 4000000000, 4000000000] has more bytes"), "{e}");
    let e =
        lower_graph(vec![named(node("Relu", &[], vec![]), "r", &["x"], "y")], vec![], &[1 << 40], Limits::default())
            .unwrap_err()
            .to_string();
    assert!(e.starts_with("input `x` of shape [1099511627776] needs 4096 GiB"), "{e}");
    let expand = named(node("Expand", &[], vec![]), "e", &["x", "to"], "y");
    let e = lower_graph(vec![expand], vec![ints("to", &[2], &[1 << 40, 1 << 40])], &[1], Limits::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("(Expand, opset 17): target shape of shape [1099511627776, 1099511627776] has more bytes"),
        "{e}"
    );
    // The limit is configurable: 1 KiB refuses 2 KiB of weights.
    let w = floats("w", &[512], &[0.5; 512]);
    let add = named(node("Add", &[], vec![]), "a", &["x", "w"], "y");
    let e = lower_graph(vec![add], vec![w], &[512], Limits { max_memory: 1024 }).unwrap_err().to_string();
    assert!(e.contains("needs 2 KiB, the limit is 1 KiB"), "{e}");
}

#[test]
fn folding_is_bounded_by_work_not_just_size() {
    // 2^28 additions: too many to fold; the sum becomes a kernel computed at run time.
    let (nodes, inits) = sum_of_constant(&[1 << 14, 1 << 14]);
    let lowered = lower_graph(nodes, inits, &[1], Limits::default()).unwrap();
    let [k] = &lowered.program.kernels[..] else { panic!("one kernel expected") };
    assert!(lowered.program.ctx.has_reduce(k.expr), "the sum is computed at run time");
    // 2^10 additions fold into a constant; the kernel only adds it.
    let (nodes, inits) = sum_of_constant(&[1 << 5, 1 << 5]);
    let lowered = lower_graph(nodes, inits, &[1], Limits::default()).unwrap();
    let [k] = &lowered.program.kernels[..] else { panic!("one kernel expected") };
    assert!(!lowered.program.ctx.has_reduce(k.expr), "the sum was folded");
}

#[test]
fn the_planned_total_is_within_the_limit() {
    // Each value is 1 KiB, within a 2 KiB limit; input, weight and output together need 3 KiB.
    let w = floats("w", &[256], &[0.5; 256]);
    let add = named(node("Add", &[], vec![]), "a", &["x", "w"], "y");
    let limits = Limits { max_memory: 2048 };
    let lowered = lower_graph(vec![add], vec![w], &[256], limits).unwrap();
    let e = pilot_compiler::lower::budget::check_planned(&lowered.program, limits).unwrap_err();
    assert!(e.starts_with("the model needs 3 KiB at run time") && e.contains("the limit is 2 KiB"), "{e}");
    pilot_compiler::lower::budget::check_planned(&lowered.program, Limits { max_memory: 3072 }).unwrap();
}

/// Compile time is kept linear in the node count by bounding what one kernel fuses; the timing
/// itself is measured by `scripts/compile_scaling.sh`. Here: a chain of 5000 Adds is cut into
/// kernels no deeper than the cap, so no pass ever walks an expression of the whole chain.
#[test]
fn long_chains_are_cut_into_kernels_of_bounded_depth() {
    let n = 5000;
    let nodes: Vec<pb::NodeProto> = (0..n)
        .map(|i| {
            let input = if i == 0 { "x".to_string() } else { format!("v{}", i - 1) };
            let output = if i == n - 1 { "y".to_string() } else { format!("v{i}") };
            named(node("Add", &[], vec![]), &format!("add{i}"), &[&input, "x"], &output)
        })
        .collect();
    let lowered = lower_graph(nodes, vec![], &[1, 16], Limits::default()).unwrap();
    let p = &lowered.program;
    let cap = pilot_compiler::lower::MAX_FUSED_DEPTH;
    assert!(p.kernels.iter().all(|k| p.ctx.depth(k.expr) <= cap + 8), "a kernel fused past the depth cap");
    let fewest = n / cap as usize;
    assert!((fewest..=2 * fewest + 1).contains(&p.kernels.len()), "{} kernels", p.kernels.len());
}
