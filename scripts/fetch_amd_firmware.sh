#!/usr/bin/env bash
# Fetches the real AMD GPU firmware (Debian trixie's `firmware-amd-graphics`, component non-free-firmware)
# for pilot-amd's firmware tests, WITHOUT touching the machine's apt configuration: a private sources
# file, lists and cache under target/amd-firmware/apt, `apt-get download` (no install) and `dpkg -x` into
# target/amd-firmware/root. The files land in target/amd-firmware/root/usr/lib/firmware/amdgpu/ (plain *.bin in
# this version; tests read PILOT_AMD_FIRMWARE or that path). Idempotent and quiet when done.
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned: amd/tests/firmware_real.rs asserts this version's header values. When trixie moves on, the
# download below fails naming it; update both together.
version=20250410-2

out=target/amd-firmware
root=$out/root
fw=$root/usr/lib/firmware/amdgpu  # trixie is merged-/usr
stamp=$out/done

[ "$(cat "$stamp" 2>/dev/null)" = "firmware-amd-graphics_${version}_all.deb" ] && [ -d "$fw" ] && exit 0

. scripts/lib/private_apt.sh

apt_dir=$(pwd)/$out/apt
rm -rf "$apt_dir" "$root"
mkdir -p "$apt_dir/debs" "$root"
private_apt "$apt_dir" deb non-free-firmware

echo "setup: fetching firmware-amd-graphics (Debian trixie, non-free-firmware) into $root" >&2
apt-get "${apt_opts[@]}" update -qq >/dev/null
(cd "$apt_dir/debs" && apt-get "${apt_opts[@]}" download -qq "firmware-amd-graphics=$version" >/dev/null) || {
  echo "fetch_amd_firmware: firmware-amd-graphics $version is not in $apt_mirror trixie any more:" \
    "set \$version in $0 to the current one and update amd/tests/firmware_real.rs" >&2
  exit 1
}
deb=$apt_dir/debs/firmware-amd-graphics_${version}_all.deb
dpkg -x "$deb" "$root"
# apt checked the .deb against the signed Release file; check every unpacked file against the package's md5sums.
dpkg-deb -e "$deb" "$apt_dir/control"
(cd "$root" && md5sum --quiet -c "$apt_dir/control/md5sums")
[ -d "$fw" ] || { echo "fetch_amd_firmware: $deb has no usr/lib/firmware/amdgpu" >&2; exit 1; }
basename "$deb" >"$stamp"
