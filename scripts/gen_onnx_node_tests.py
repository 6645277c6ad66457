"""Writes the ONNX backend node test cases shipped in the `onnx` package to DIR, in the layout of
`onnx/backend/test/data/node`: DIR/<case>/model.onnx and DIR/<case>/test_data_set_N/{input,output}_K.pb.

Usage: .venv/bin/python scripts/gen_onnx_node_tests.py DIR
"""
import os
import shutil
import sys

import onnx.backend.test.case.node as node_test
from onnx import TensorProto, numpy_helper


def main(out: str) -> None:
    cases = node_test.collect_testcases()
    os.makedirs(out, exist_ok=True)
    written = 0
    for case in cases:
        d = os.path.join(out, case.name)
        if os.path.exists(d):
            shutil.rmtree(d)
        os.makedirs(d)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        for i, (inputs, outputs) in enumerate(case.data_sets):
            ds = os.path.join(d, f"test_data_set_{i}")
            os.makedirs(ds)
            graph = case.model.graph
            for kind, values, infos in (("input", inputs, graph.input), ("output", outputs, graph.output)):
                for j, v in enumerate(values):
                    if not infos[j].type.HasField("tensor_type"):
                        continue  # sequences, maps, optionals: not tensors, skipped by the runner
                    proto = v if isinstance(v, TensorProto) else numpy_helper.from_array(v, infos[j].name)
                    with open(os.path.join(ds, f"{kind}_{j}.pb"), "wb") as f:
                        f.write(proto.SerializeToString())
        written += 1
    print(f"{written} node test cases in {out}")


if __name__ == "__main__":
    main(sys.argv[1])
