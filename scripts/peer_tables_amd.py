#!/usr/bin/env python3
"""Prints tinygrad 0.14.0's values for the AMD names read from stdin (one request per line), one line each:
`REQUEST VALUE`, VALUE an integer or `none` when tinygrad does not define the name.

tinygrad is the peer the simulated GPU's own tables are checked against (usb-sim/tests/sim_gpu_peer_tables.rs).
A request is
- `reg:MODULE:NAME`: the register's `offset*16+segment` from tinygrad/runtime/autogen/am/regs.py MODULE
  (e.g. `reg:gc_11_0_0:regCP_HQD_ACTIVE`);
- `const:MODULE:NAME`: an integer constant of tinygrad.runtime.autogen.am.MODULE (am, pm4_nv, sdma_6_0_0,
  smu_13_0_0, smu_14_0_2, ...).
Exits 1 with a message if tinygrad 0.14.0 is not importable.
"""
import importlib
import importlib.metadata
import sys

WANT = "0.14.0"


def main() -> int:
    try:
        version = importlib.metadata.version("tinygrad")
        from tinygrad.runtime.autogen.am import regs
    except Exception as e:  # noqa: BLE001 - any import failure means the peer is missing
        print(f"peer_tables_amd.py: cannot import tinygrad's AMD tables ({e}); run scripts/setup.sh", file=sys.stderr)
        return 1
    if version != WANT:
        print(f"peer_tables_amd.py: tinygrad {version} is installed, the checks are for {WANT}", file=sys.stderr)
        return 1
    for line in sys.stdin.read().split():
        kind, module, name = line.split(":", 2)
        value = None
        if kind == "reg":
            entry = getattr(regs, module, {}).get(name)
            if entry is not None:
                value = entry[0] * 16 + entry[1]
        elif kind == "const":
            mod = importlib.import_module(f"tinygrad.runtime.autogen.am.{module}")
            v = getattr(mod, name, None)
            if isinstance(v, int) and not isinstance(v, bool):
                value = v
        print(line, "none" if value is None else value)
    return 0


if __name__ == "__main__":
    sys.exit(main())
