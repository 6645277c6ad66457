#!/usr/bin/env bash
# Fetches Mesa's source (Debian trixie's `mesa` source package, a pinned version) and builds, once, what pilot's
# QCOM ir3 path needs from it, into target/mesa:
#   - the static libraries of Mesa's ir3 compiler (nir, ir3, isaspec, freedreno_common, util, ...), which the
#     compiler's ir3 back end links through a small C shim;
#   - `ir3-disasm` and `cffdump`, the independent witnesses the tests run on pilot's a6xx code and command streams;
#   - target/mesa/libpilot_ir3.so (mesa-ir3/build.sh): pilot's shim over those libraries, which
#     `--qcom-compiler ir3` opens at run time.
# The source comes with `apt-get source --download-only` from a private `deb-src` sources file, lists and cache
# under target/mesa/apt: the machine's own apt sources are untouched. Build tools (meson, ninja, mako, ply) come
# from PyPI into target/mesa/venv. Idempotent and quiet when done: a stamp names the version built.
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned: the ir3 back end's shim is written against this version's headers.
version=25.0.7-2+deb13u1

out=$PWD/target/mesa
stamp=$out/done
# pilot's bridge to ir3 (target/mesa/libpilot_ir3.so) is rebuilt whenever its source changes.
[ "$(cat "$stamp" 2>/dev/null)" = "mesa_$version" ] && exec mesa-ir3/build.sh

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
need_apt=()
for pkg in flex bison pkg-config libdrm-dev liblua5.4-dev libarchive-dev libxml2-dev zlib1g-dev libzstd-dev libexpat1-dev dpkg-dev; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "build_mesa: installing ${need_apt[*]}" >&2
  sudo_if_needed apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive sudo_if_needed apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${need_apt[@]}" >/dev/null
fi

. scripts/lib/private_apt.sh

apt_dir=$out/apt
src_root=$out/src
rm -rf "$apt_dir" "$src_root" "$out/build" "$stamp"
mkdir -p "$src_root"
private_apt "$apt_dir" deb-src main
echo "setup: fetching the mesa $version source (Debian trixie) into $src_root" >&2
apt-get "${apt_opts[@]}" update -qq >/dev/null
(cd "$src_root" && apt-get "${apt_opts[@]}" source --download-only -qq "mesa=$version" >/dev/null) || {
  echo "build_mesa: mesa $version is not in $apt_mirror trixie any more: set \$version in $0 to the current one" >&2
  exit 1
}
# apt checked the .dsc against the signed Sources index; dpkg-source checks every file against the .dsc's checksums.
(cd "$src_root" && dpkg-source -x "mesa_$version.dsc" mesa >/dev/null)
src=$src_root/mesa

[ -x "$out/venv/bin/meson" ] || {
  python3 -m venv "$out/venv"
  "$out/venv/bin/pip" install -q --disable-pip-version-check 'meson==1.7.2' 'ninja==1.11.1.4' 'mako==1.3.10' 'ply==3.11' 'pyyaml==6.0.2'
}
export PATH="$out/venv/bin:$PATH"

echo "setup: building Mesa's ir3 compiler, ir3-disasm and cffdump (several minutes, once)" >&2
meson setup "$out/build" "$src" --wrap-mode=nodownload --buildtype=release -Db_ndebug=true \
  -Dplatforms= -Dgallium-drivers= -Dvulkan-drivers= -Dtools=freedreno -Dllvm=disabled -Dglx=disabled \
  -Degl=disabled -Dgbm=disabled -Dgles1=disabled -Dgles2=disabled -Dopengl=false -Dfreedreno-kmds=kgsl \
  -Dvalgrind=disabled -Dlibunwind=disabled -Dzstd=enabled >"$out/meson-setup.log" 2>&1 || {
  echo "build_mesa: meson setup failed; see $out/meson-setup.log" >&2; tail -20 "$out/meson-setup.log" >&2; exit 1; }
ninja -C "$out/build" src/freedreno/isa/ir3-disasm src/freedreno/decode/cffdump \
  src/freedreno/ir3/libfreedreno_ir3.a >"$out/ninja.log" 2>&1 || {
  echo "build_mesa: the build failed; see $out/ninja.log" >&2; tail -30 "$out/ninja.log" >&2; exit 1; }
echo "mesa_$version" >"$stamp"
mesa-ir3/build.sh
