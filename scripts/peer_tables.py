#!/usr/bin/env python3
"""Prints tinygrad 0.14.0's values for the names read from stdin (one per line), as one JSON object.

tinygrad is the peer pilot's QCOM tables are checked against (qcom/tests/peer_tables.rs). A name is
- a constant of tinygrad/runtime/autogen/mesa.py (Mesa's a6xx.xml / adreno_pm4.xml) or kgsl.py (msm_kgsl.h),
    e.g. `REG_A6XX_SP_CS_CNTL_0`, `A6XX_SP_CS_CONFIG_NTEX__SHIFT`, `CP_RUN_OPENCL`, `KGSL_CMDLIST_IB`;
- `ioctl:IOCTL_KGSL_GPU_COMMAND`: the request number tinygrad's ioctl wrapper computes for it;
- `pkt4:REG:CNT` / `pkt7:OPCODE:CNT`: the PM4 header tinygrad's ops_qcom.pkt4_hdr / pkt7_hdr encode.
Names tinygrad does not define map to null. Exits 1 with a message if tinygrad 0.14.0 is not importable.
"""
import ctypes
import importlib.metadata
import json
import sys

WANT = "0.14.0"


def main() -> int:
    try:
        version = importlib.metadata.version("tinygrad")
        from tinygrad.runtime.autogen import kgsl, mesa
        from tinygrad.runtime.ops_qcom import pkt4_hdr, pkt7_hdr
    except Exception as e:  # noqa: BLE001 - any import failure means the peer is missing
        print(f"peer_tables.py: cannot import tinygrad's QCOM tables ({e}); run scripts/setup.sh", file=sys.stderr)
        return 1
    if version != WANT:
        print(f"peer_tables.py: tinygrad {version} is installed, the checks are for {WANT}", file=sys.stderr)
        return 1

    def constant(name):
        for module in (mesa, kgsl):
            v = getattr(module, name, None)
            if isinstance(v, int) and not isinstance(v, bool):
                return v
        return None

    def ioctl(name):
        request = getattr(kgsl, name, None)
        if request is None or not hasattr(request, "args"):
            return None
        direction, base, nr, struct = request.args
        return (direction << 30) | (ctypes.sizeof(struct) << 16) | (base << 8) | nr

    out = {}
    for name in sys.stdin.read().split():
        kind, _, rest = name.partition(":")
        if kind == "ioctl":
            out[name] = ioctl(rest)
        elif kind in ("pkt4", "pkt7"):
            a, b = (int(x, 0) for x in rest.split(":"))
            out[name] = pkt4_hdr(a, b) if kind == "pkt4" else pkt7_hdr(a, b)
        else:
            out[name] = constant(name)
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
