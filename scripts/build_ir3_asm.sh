#!/usr/bin/env bash
# Builds `ir3-asm` (a6xx-emu/tools/ir3_asm.c) against the Mesa that scripts/build_mesa.sh built into target/mesa:
# Mesa's own ir3 assembler (ir3_parse_asm), the independent encoder the a6xx emulator's instruction tests use.
# Compile flags and link line are the ones Mesa's build uses for its ir3 delay test (build.ninja). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
b=$PWD/target/mesa/build
s=$PWD/target/mesa/src/mesa
src=$PWD/a6xx-emu/tools/ir3_asm.c
out=$PWD/target/ir3-asm/ir3-asm
mkdir -p "$(dirname "$out")"
[ -f "$b/src/freedreno/ir3/libfreedreno_ir3.a" ] || { echo "build_ir3_asm: run scripts/build_mesa.sh first" >&2; exit 1; }
[ "$out" -nt "$src" ] && exit 0
export PATH="$PWD/target/mesa/venv/bin:$PATH"
libs=(src/freedreno/ir3/libfreedreno_ir3.a src/freedreno/isa/libir3encode.a src/util/libmesa_util.a
  src/util/libmesa_util_sse41.a src/util/blake3/libblake3.a src/c11/impl/libmesa_util_c11.a src/compiler/nir/libnir.a
  src/compiler/libcompiler.a src/freedreno/common/libfreedreno_common.a src/freedreno/isa/libir3decode.a
  src/compiler/isaspec/libisaspec.a)
ninja -C "$b" "${libs[@]}" >/dev/null
cd "$b"
inc=(-Isrc/freedreno/ir3 -I"$s/src/freedreno/ir3" -Isrc/freedreno -I"$s/src/freedreno" -Isrc/freedreno/registers
  -I"$s/src/freedreno/registers" -Isrc/freedreno/common -I"$s/src/freedreno/common" -Iinclude -I"$s/include" -Isrc
  -I"$s/src" -Isrc/compiler/nir -I"$s/src/compiler/nir" -Isrc/compiler -I"$s/src/compiler" -Isrc/util/format)
# The same -D configuration Mesa compiled its own ir3 tests with (one line of build.ninja).
mapfile -t defs < <(grep -A4 '^build src/freedreno/ir3/ir3_delay_test.p/tests_delay.c.o:' build.ninja \
  | grep -m1 '^ ARGS = ' | grep -oE "'?-D[^ ]+" | tr -d "'")
[ ${#defs[@]} -gt 10 ] || { echo "build_ir3_asm: no compile flags for Mesa's ir3 tests in $b/build.ninja" >&2; exit 1; }
cc -std=c11 -O1 -w "${defs[@]}" "${inc[@]}" -c "$src" -o "$out.o"
c++ -o "$out.tmp" "$out.o" -Wl,--start-group "${libs[@]}" -lz -lzstd -pthread -lm -Wl,--end-group
mv "$out.tmp" "$out"
