#!/usr/bin/env bash
# Builds every guest crate of the plugins/ workspace into a Wasm component:
#   target/plugins/<name>.wasm + <name>.yaml       first-party plugins (plugins/<crate>)
#   target/test-guests/<name>.wasm + <name>.yaml   the sandbox suite's guests (plugins/testing/<crate>)
# <name> and the .yaml are the crate's weft-plugin.yaml manifest.
#
# Every guest builds for wasm32-unknown-unknown, so std (built from source
# on the Debian route) is compiled once per run and cached in cargo's
# target directory, which lives outside the work tree
# ($WEFT_BUILD_CACHE/guests, default ~/.cache/weft/build/guests): a clean
# clone on a machine that built the guests before compiles only what
# changed, as cargo decides (CI's clean clones spent 4-5 minutes here
# rebuilding std and every dependency); web-API plugins (world webapi-task-plugin) get a cargo
# invocation of their own, so the SDK's `webapi` feature they enable is not
# unified into the 0.1 components (which stay byte-for-byte what they were
# without it).
#
# Each component is validated and checked against its manifest: it must
# export the manifest's world and import only the weft:plugin interfaces of
# that world's version (a web-API plugin also wasi:http, the wasi:io
# streams and pollables it works with, and wasi:clocks/monotonic-clock,
# whose duration wasi:http's types use; a crate whose Cargo.toml says
# `[package.metadata.weft] wasi = true`, the sandbox's escape guest, any
# WASI interface).
# Incremental: with nothing changed a run takes about a second.
# WEFT_GUESTS=plugins: only the first-party plugins (target/plugins).
set -euo pipefail
# Any failing command says where it failed, whoever hides this script's stdout.
trap 'echo "$0: line $LINENO: \`$BASH_COMMAND\` failed (status $?)" >&2' ERR
cd "$(dirname "$0")/.."
root=$PWD
start=$(date +%s%N)

# shellcheck source=/dev/null
[ -f target/guest-toolchain.env ] && source target/guest-toolchain.env
if [ -z "${WEFT_ROUTE_WASM32_UNKNOWN_UNKNOWN:-}" ]; then
  bash .ci/guest-toolchain.sh
  # shellcheck source=/dev/null
  source target/guest-toolchain.env
fi
wasm_tools=${WEFT_WASM_TOOLS:-wasm-tools}
cache=${WEFT_BUILD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/weft/build}
export CARGO_TARGET_DIR="$cache/guests"
mkdir -p "$CARGO_TARGET_DIR"

# The cargo command line, per the chosen route.
target=wasm32-unknown-unknown
if [ "$WEFT_ROUTE_WASM32_UNKNOWN_UNKNOWN" = rustup ]; then
  cargo_cmd=(cargo)
  std_args=()
else
  # Debian's rustc-web; RUSTC_BOOTSTRAP unlocks -Zbuild-std on a stable
  # compiler. rustup's proxies come first on PATH, so name everything.
  cargo_cmd=(env -u RUSTUP_TOOLCHAIN RUSTC_BOOTSTRAP=1 RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
    CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER="$WEFT_WASM_LD"
    /usr/bin/cargo)
  std_args=(-Zbuild-std=std,panic_abort)
fi

# The guests: one line each, "wasi package crate-dir out-dir name world".
metadata=$(cd plugins && "${cargo_cmd[@]}" metadata --format-version 1 --locked)
guests=$(python3 -c '
import json, os, re, sys
root = sys.argv[1]
meta = json.load(sys.stdin)
members = set(meta["workspace_members"])
for p in meta["packages"]:
    if p["id"] not in members:
        continue
    crate = os.path.relpath(os.path.dirname(p["manifest_path"]), root)
    manifest = os.path.join(root, crate, "weft-plugin.yaml")
    if not os.path.isfile(manifest):
        continue
    text = open(manifest).read()
    name = re.search(r"^name:\s*(\S+)", text, re.M).group(1)
    world = re.search(r"^world:\s*(\S+)", text, re.M).group(1)
    wasi = "wasi" if ((p.get("metadata") or {}).get("weft") or {}).get("wasi") else "-"
    out = "test-guests" if crate.startswith("plugins/testing/") else "plugins"
    print(wasi, p["name"], crate, out, name, world)
' "$root" <<<"$metadata" | sort -k4,4 -k5,5)
# WEFT_GUESTS=plugins builds the first-party plugins only (what `make run`
# needs); the default builds the test guests too.
if [ "${WEFT_GUESTS:-all}" = plugins ]; then
  guests=$(awk '$4 == "plugins"' <<<"$guests")
fi

# One cargo invocation per contract version (0.1 worlds, the 0.2 web-API
# world).
for family in v01 webapi; do
  pkgs=()
  for p in $(awk -v f="$family" '(($6 == "webapi-task-plugin") == (f == "webapi")) {print $2}' <<<"$guests"); do
    pkgs+=(-p "$p")
  done
  [ ${#pkgs[@]} -gt 0 ] || continue
  (cd plugins && "${cargo_cmd[@]}" build --quiet --release --locked "${std_args[@]}" --target "$target" "${pkgs[@]}")
done

mkdir -p target/plugins target/test-guests
status=0
while read -r wasi pkg crate out name world; do
  core="$CARGO_TARGET_DIR/$target/release/${pkg//-/_}.wasm"
  dest="target/$out/$name"
  note=$world
  [ "$wasi" = wasi ] && note="$world, imports WASI"
  # Re-wrap when the core module is newer or its path changed.
  stamp="target/guest-stamps/$out-$name"
  if [ ! -f "$dest.wasm" ] || [ "$core" -nt "$dest.wasm" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$core" ]; then
    "$wasm_tools" component new "$core" -o "$dest.wasm.tmp"
    "$wasm_tools" validate "$dest.wasm.tmp"
    mv "$dest.wasm.tmp" "$dest.wasm"
    mkdir -p "$(dirname "$stamp")"
    echo "$core" >"$stamp"
  fi
  cmp -s "$crate/weft-plugin.yaml" "$dest.yaml" || cp "$crate/weft-plugin.yaml" "$dest.yaml"

  # The component must be what its manifest says, and reach for nothing else.
  wit=$("$wasm_tools" component wit "$dest.wasm")
  case "$world" in
    k8s-task-plugin) want="weft:plugin/k8s-task@0.1.0" ;;
    middleware-plugin) want="weft:plugin/middleware@0.1.0" ;;
    webapi-task-plugin) want="weft:plugin/webapi-task@0.2.0" ;;
    *) want="?" ;;
  esac
  exports=$(sed -n 's/^ *export \([^;]*\);$/\1/p' <<<"$wit" | tr '\n' ' ')
  version=${want##*@}
  allowed="^weft:plugin/[a-z-]+@${version//./\\.}\$"
  [ "$world" = webapi-task-plugin ] &&
    allowed="$allowed|^wasi:(http/[a-z-]+|io/[a-z-]+|clocks/monotonic-clock)@0\\.2\\.[0-9]+\$"
  [ "$wasi" = wasi ] && allowed="$allowed|^wasi:"
  stray=$(sed -n 's/^ *import \([^;]*\);$/\1/p' <<<"$wit" | grep -Ev "$allowed" | tr '\n' ' ' || true)
  if [ "$exports" != "$want " ] || [ -n "$stray" ]; then
    echo "$dest.wasm: exports [$exports] (manifest world $world wants $want), unexpected imports [$stray]" >&2
    status=1
  fi
  printf '  %-40s %8d bytes  %s\n' "$dest.wasm" "$(stat -c %s "$dest.wasm")" "$note"
done <<<"$guests"

ms=$((($(date +%s%N) - start) / 1000000))
printf 'guests: %d components in %d.%03ds\n' "$(wc -l <<<"$guests")" $((ms / 1000)) $((ms % 1000))
exit $status
