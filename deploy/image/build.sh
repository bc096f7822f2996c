#!/usr/bin/env bash
# Builds the weft image's contents into OUT_DIR, laid out as the image's
# root filesystem:
#
#   OUT_DIR/usr/local/bin/weft
#   OUT_DIR/var/lib/weft/plugins/   the plugins `weft controller --plugins` loads
#                                   at start (empty unless WEFT_BAKE_PLUGINS=1)
#   OUT_DIR/var/cache/weft/         the precompiled plugin cache (--cache-dir)
#
# then checks what it built by running it. deploy/image/Dockerfile runs this
# in its builder stage; .ci/check-image.sh runs it outside a container.
#
#   deploy/image/build.sh OUT_DIR
#
# Environment:
#   WEFT_IMAGE_PROFILE  cargo profile (default release; CI passes dev to
#                       reuse its debug build, whose output is target/debug)
#   WEFT_BAKE_PLUGINS   1: build the first-party plugins and bake them into
#                       /var/lib/weft/plugins (default 0)
#   CARGO_TARGET_DIR    as for cargo (default: the repository's target/)
#   WEFT_IMAGE_BIN      a weft binary already built: installed as it is,
#                       no cargo build (CI passes the one its test suite
#                       ran: `cargo build -p weft` resolves features without
#                       the tests' dev-dependencies, so it would rebuild
#                       wasmtime, hyper and ~30 more crates, ~10 minutes)
set -euo pipefail

die() { echo "build.sh: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: deploy/image/build.sh OUT_DIR"
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
profile=${WEFT_IMAGE_PROFILE:-release}
bake=${WEFT_BAKE_PLUGINS:-0}
case $bake in 0 | 1) ;; *) die "WEFT_BAKE_PLUGINS must be 0 or 1, not '$bake'" ;; esac
plugins=(pod spark k8s-resource ray-job http auth-token request-id rate-limit audit)

cd "$root"
target_dir=${CARGO_TARGET_DIR:-$root/target}
case $target_dir in /*) ;; *) target_dir=$root/$target_dir ;; esac
# cargo's output directory for a profile: dev builds to debug/.
case $profile in
  dev) profile_dir=debug ;;
  *) profile_dir=$profile ;;
esac

if [ -n "${WEFT_IMAGE_BIN:-}" ]; then
  bin=$WEFT_IMAGE_BIN
  [ -x "$bin" ] || die "WEFT_IMAGE_BIN=$bin: not an executable"
  echo "build.sh: the weft binary given, $bin" >&2
else
  echo "build.sh: cargo build --locked --profile $profile -p weft" >&2
  cargo build --locked --profile "$profile" -p weft
  bin=$target_dir/$profile_dir/weft
  [ -x "$bin" ] || die "$bin: cargo built no weft binary there"
fi

install -d "$out/usr/local/bin" "$out/var/lib/weft/plugins" "$out/var/cache/weft"
install -m 0755 "$bin" "$out/usr/local/bin/weft"

if [ "$bake" = 1 ]; then
  # What `make guests` does for target/plugins (the toolchain, then every
  # guest), without the SDK examples: those need node, zig and
  # componentize-py, and the image holds none of them.
  echo "build.sh: building the plugins (.ci/guest-toolchain.sh, .ci/build-guests.sh)" >&2
  bash .ci/guest-toolchain.sh
  bash .ci/build-guests.sh
  for p in "${plugins[@]}"; do
    for ext in wasm yaml; do
      [ -f "target/plugins/$p.$ext" ] || die "target/plugins/$p.$ext: not built"
      install -m 0644 "target/plugins/$p.$ext" "$out/var/lib/weft/plugins/$p.$ext"
    done
  done
fi

# Check what was built, with the binary that goes into the image.
weft=$out/usr/local/bin/weft
"$weft" --version >&2 || die "$weft --version failed"
"$weft" crd | grep -q '^kind: CustomResourceDefinition$' ||
  die "$weft crd does not print the Workflow CRD"
if [ "$bake" = 1 ]; then
  for p in "${plugins[@]}"; do
    "$weft" plugin inspect "$out/var/lib/weft/plugins/$p.wasm" >/dev/null ||
      die "$weft plugin inspect $p.wasm failed: the baked plugin does not load"
  done
  echo "build.sh: baked ${#plugins[@]} plugins: ${plugins[*]}" >&2
fi
echo "build.sh: $out ready" >&2
