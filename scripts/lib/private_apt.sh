# Sourced by scripts that fetch from Debian trixie without touching the machine's apt configuration
# (fetch_amd_firmware.sh, build_mesa.sh): a private sources file, lists, status and cache under one directory.

# private_apt DIR TYPE COMPONENT: prepares DIR with one sources line, "TYPE [signed-by=...] MIRROR trixie COMPONENT"
# (TYPE `deb` or `deb-src`), where MIRROR is the Debian mirror the machine already uses (deb822 or one-line
# sources), else deb.debian.org. Sets `apt_mirror` and the array `apt_opts` to pass to every apt-get call.
private_apt() {
  local dir=$1 type=$2 component=$3
  apt_mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null \
    | grep -v '^[[:space:]]*#' | grep -oE 'https?://[^ ]+/debian/?( |$)' | head -n1 | tr -d ' ' || true)
  apt_mirror=${apt_mirror%/}
  [ -n "$apt_mirror" ] || apt_mirror=http://deb.debian.org/debian
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
  echo "$type [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $apt_mirror trixie $component" >"$dir/sources.list"
  : >"$dir/status"
  apt_opts=(
    -o "Dir::Etc::SourceList=$dir/sources.list"
    -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$dir/lists"
    -o "Dir::State::status=$dir/status"
    -o "Dir::Cache=$dir/cache"
    -o Dir::Etc::Preferences=/dev/null
    -o Dir::Etc::PreferencesParts=/dev/null
    -o APT::Sandbox::User=root
    -o Acquire::Languages=none
  )
}
