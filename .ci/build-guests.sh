#!/usr/bin/env bash
# Builds every guest in plugins/ from source into Wasm components:
#   target/plugins/<name>.wasm + .yaml       first-party plugins
#   target/test-guests/<name>.wasm + .yaml   the sandbox suite's guests
# One cargo invocation per (target, world), so std is built once per target
# and a crate never gets both worlds' bindings. Incremental: a second run
# with nothing changed takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
[ -f target/guest-toolchain.env ] || bash .ci/guest-toolchain.sh >/dev/null
# shellcheck disable=SC1091
source target/guest-toolchain.env

export CARGO_TARGET_DIR="$root/plugins/target"
if [ "$WEFT_GUEST_ROUTE" = rustup ]; then
  cargo_cmd=(cargo)
  build_std=()
else
  # Debian's rustc-web: build std from source (RUSTC_BOOTSTRAP unlocks -Z).
  cargo_cmd=(env RUSTC_BOOTSTRAP=1 RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc /usr/bin/cargo)
  build_std=(-Zbuild-std=std,panic_abort)
  export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER=wasm-ld
  export CARGO_TARGET_WASM32_WASIP1_LINKER=wasm-ld
  export CARGO_TARGET_WASM32_WASIP1_RUSTFLAGS="-L native=/usr/lib/wasm32-wasi"
fi

# package name -> (output dir, component name), from each crate's manifest.
declare -A out_dir
task_pkgs=() mw_pkgs=() wasi_pkgs=()
for manifest in plugins/*/weft-plugin.yaml plugins/testing/*/weft-plugin.yaml; do
  [ -f "$manifest" ] || continue
  crate_dir=$(dirname "$manifest")
  pkg=$(sed -n 's/^name = "\(.*\)"/\1/p' "$crate_dir/Cargo.toml" | head -1)
  case "$crate_dir" in plugins/testing/*) out_dir[$pkg]=test-guests ;; *) out_dir[$pkg]=plugins ;; esac
  if grep -q '^# guest-target: wasm32-wasip1' "$crate_dir/Cargo.toml"; then
    wasi_pkgs+=("$pkg")
  elif grep -q '^world: middleware-plugin' "$manifest"; then
    mw_pkgs+=("$pkg")
  else
    task_pkgs+=("$pkg")
  fi
done

build() { # target, packages...
  local target=$1; shift
  [ $# -gt 0 ] || return 0
  local args=()
  for p in "$@"; do args+=(-p "$p"); done
  (cd plugins && "${cargo_cmd[@]}" build --quiet --release --locked "${build_std[@]}" --target "$target" "${args[@]}")
}

build wasm32-unknown-unknown "${task_pkgs[@]}"
build wasm32-unknown-unknown "${mw_pkgs[@]}"
build wasm32-wasip1 "${wasi_pkgs[@]}"

# The WASI preview1 -> preview2 adapter (reactor), from the crates.io crate
# wasi-preview1-component-adapter-provider that cargo fetched for the escape guest.
adapter=""
if [ ${#wasi_pkgs[@]} -gt 0 ]; then
  adapter=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/wasi-preview1-component-adapter-provider-*/artefacts/wasi_snapshot_preview1.reactor.wasm 2>/dev/null | sort -V | tail -1)
  [ -n "$adapter" ] || { echo "no wasi preview1 reactor adapter found in the cargo registry" >&2; exit 1; }
fi

mkdir -p target/plugins target/test-guests
for manifest in plugins/*/weft-plugin.yaml plugins/testing/*/weft-plugin.yaml; do
  [ -f "$manifest" ] || continue
  crate_dir=$(dirname "$manifest")
  pkg=$(sed -n 's/^name = "\(.*\)"/\1/p' "$crate_dir/Cargo.toml" | head -1)
  name=$(sed -n 's/^name: *//p' "$manifest" | head -1)
  lib=${pkg//-/_}
  dest="target/${out_dir[$pkg]}/$name"
  if printf '%s\n' "${wasi_pkgs[@]}" | grep -qx "$pkg"; then
    core="plugins/target/wasm32-wasip1/release/$lib.wasm"
    adapt=(--adapt "wasi_snapshot_preview1=$adapter")
  else
    core="plugins/target/wasm32-unknown-unknown/release/$lib.wasm"
    adapt=()
  fi
  if [ ! -f "$dest.wasm" ] || [ "$core" -nt "$dest.wasm" ] || [ "$manifest" -nt "$dest.yaml" ]; then
    wasm-tools component new "$core" "${adapt[@]}" -o "$dest.wasm"
    wasm-tools validate --features component-model "$dest.wasm"
    cp "$manifest" "$dest.yaml"
  fi
  printf '  %-32s %8d bytes\n' "$dest.wasm" "$(stat -c %s "$dest.wasm")"
done
