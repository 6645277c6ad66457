#!/usr/bin/env bash
# Builds target/mesa/libpilot_ir3.so: mesa-ir3/pilot_ir3.c against the Mesa source and static libraries
# scripts/build_mesa.sh built in target/mesa. Called by build_mesa.sh; rebuilt when pilot_ir3.c changes.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/target/mesa
src=$out/src/mesa
bld=$out/build
lib=$out/libpilot_ir3.so
stamp=$out/libpilot_ir3.stamp
sum=$(cat mesa-ir3/pilot_ir3.c mesa-ir3/build.sh "$out/done" | sha256sum | cut -c1-64)
[ -f "$lib" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$sum" ] && exit 0
# The exact flags Mesa's build compiled ir3 with (its structs' layouts depend on them), from meson's
# compile_commands.json, minus the dependency-file and output options.
flags=$(python3 - "$bld/compile_commands.json" <<'PY'
import json, shlex, sys
for c in json.load(open(sys.argv[1])):
    if c["file"].endswith("ir3_compiler_nir.c"):
        args, out, skip = shlex.split(c["command"])[1:], [], 0
        for a in args:
            if skip: skip -= 1; continue
            if a in ("-MD",): continue
            if a in ("-MQ", "-MF", "-o", "-c"): skip = 1; continue
            out.append(a)
        print(shlex.join(out)); break
else:
    sys.exit("build_mesa: ir3_compiler_nir.c is not in compile_commands.json")
PY
)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$PWD
(cd "$bld" && eval "cc $flags -I$src/src/freedreno -Wno-missing-prototypes -c $root/mesa-ir3/pilot_ir3.c -o $tmp/pilot_ir3.o")
a() { echo "$bld/$1"; }
cc -shared -o "$tmp/libpilot_ir3.so" "$tmp/pilot_ir3.o" -Wl,--no-undefined -Wl,--start-group \
  "$(a src/freedreno/ir3/libfreedreno_ir3.a)" "$(a src/freedreno/isa/libir3encode.a)" "$(a src/freedreno/isa/libir3decode.a)" \
  "$(a src/compiler/isaspec/libisaspec.a)" "$(a src/freedreno/common/libfreedreno_common.a)" "$(a src/compiler/nir/libnir.a)" \
  "$(a src/compiler/libcompiler.a)" "$(a src/util/libmesa_util.a)" "$(a src/util/libmesa_util_sse41.a)" \
  "$(a src/c11/impl/libmesa_util_c11.a)" "$(a src/util/blake3/libblake3.a)" -Wl,--end-group -lz -lzstd -lm -lpthread -ldl
mv "$tmp/libpilot_ir3.so" "$lib"
echo "$sum" >"$stamp"
