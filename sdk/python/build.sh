#!/usr/bin/env bash
# Builds a Python Weft plugin into a WebAssembly component.
#
#   sdk/python/build.sh <plugin-dir> <out-dir> [module]
#
# <plugin-dir> holds the plugin's module (default `plugin`, i.e. plugin.py, which
# binds `K8sTask = weft_plugin.export(MyPlugin)`) and its weft-plugin.yaml.
# Writes <out-dir>/<name>.wasm and <out-dir>/<name>.yaml, <name> being the
# manifest's `name`, then validates the component with wasm-tools.
#
# Environment: WEFT_WIT (default: the repo's wit/plugin), WEFT_WORLD
# (default: k8s-task-plugin).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage() { echo "usage: $0 <plugin-dir> <out-dir> [module]" >&2; exit 64; }
[ $# -ge 2 ] || usage
plugin_dir=$(cd "$1" && pwd)
mkdir -p "$2"
out_dir=$(cd "$2" && pwd)
module=${3:-plugin}
wit=$(cd "${WEFT_WIT:-$here/../../wit/plugin}" && pwd)
world=${WEFT_WORLD:-k8s-task-plugin}

manifest=$plugin_dir/weft-plugin.yaml
[ -f "$manifest" ] || { echo "$manifest: missing" >&2; exit 1; }
[ -f "$plugin_dir/$module.py" ] || [ -d "$plugin_dir/$module" ] || {
  echo "$plugin_dir: no module $module (looked for $module.py)" >&2; exit 1; }
# The manifest's top-level `name:` (quotes and a trailing comment stripped).
name=$(sed -n -E 's/^name:[[:space:]]*["'\'']?([A-Za-z0-9._-]+)["'\'']?[[:space:]]*(#.*)?$/\1/p' "$manifest" | head -n1)
[ -n "$name" ] || { echo "$manifest: no top-level name" >&2; exit 1; }

for tool in componentize-py wasm-tools; do
  command -v "$tool" >/dev/null || { echo "$tool not found: run $here/setup.sh" >&2; exit 1; }
done

out=$out_dir/$name.wasm
start=$(date +%s%N)
# -p: the plugin's own directory, then the SDK. componentize-py also adds the
# active site-packages (a virtualenv's when one is active), so pure-Python
# dependencies installed there are bundled too.
componentize-py -q -d "$wit" -w "$world" componentize "$module" \
  -p "$plugin_dir" -p "$here" -o "$out.tmp"
wasm-tools validate "$out.tmp"
mv "$out.tmp" "$out"
cp "$manifest" "$out_dir/$name.yaml"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
printf '%s: %s bytes, built in %d.%ds\n' "$out" "$(stat -c %s "$out")" $((ms / 1000)) $((ms % 1000 / 100))
echo "$out_dir/$name.yaml: manifest"
