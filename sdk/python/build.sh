#!/usr/bin/env bash
# Builds a Python Weft plugin into a WebAssembly component.
#
#   sdk/python/build.sh <plugin-dir> <out-dir> [module]
#
# <plugin-dir> holds the plugin's module (default `plugin`, i.e. plugin.py, which
# binds `K8sTask = weft_plugin.export(MyPlugin)`, or for a web-API plugin
# `WebapiTask = weft_plugin.export_webapi(MyPlugin)`) and its weft-plugin.yaml.
# Writes <out-dir>/<name>.wasm and <out-dir>/<name>.yaml, <name> being the
# manifest's `name`, then validates the component with wasm-tools.
#
# The manifest's `world:` picks the WIT: webapi-task-plugin builds against
# wit/plugin-0.2 (weft:plugin@0.2.0, with wasi:http), every other world
# against wit/plugin (0.1.0).
#
# Environment: WEFT_WIT (default: the repo's wit/plugin, or wit/plugin-0.2 for
# webapi-task-plugin), WEFT_WORLD (default: the manifest's world, else
# k8s-task-plugin), SOURCE_DATE_EPOCH (the build-time clock, default
# 315532800), WEFT_REPRODUCIBLE=0 (skip sdk/repro-shim.c), CC (default: cc).
#
# Reproducible: the same sources give a byte-identical component (see README,
# "Reproducible builds"). componentize-py snapshots CPython after importing
# the plugin, so everything the interpreter read from the host is in the
# component; the build therefore copies the sources to a clean directory
# and runs componentize-py under sdk/repro-shim.c.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../repro.sh
. "$here/../repro.sh"
usage() { echo "usage: $0 <plugin-dir> <out-dir> [module]" >&2; exit 64; }
[ $# -ge 2 ] || usage
plugin_dir=$(cd "$1" && pwd)
mkdir -p "$2"
out_dir=$(cd "$2" && pwd)
module=${3:-plugin}
manifest=$plugin_dir/weft-plugin.yaml
[ -f "$manifest" ] || { echo "$manifest: missing" >&2; exit 1; }
# The world: WEFT_WORLD, else the manifest's top-level `world:`, else
# k8s-task-plugin. webapi-task-plugin is new in weft:plugin@0.2.0
# (wit/plugin-0.2); the other worlds build against 0.1.0 as they always have.
world=${WEFT_WORLD:-$(sed -n -E 's/^world:[[:space:]]*["'\'']?([a-z0-9-]+)["'\'']?[[:space:]]*(#.*)?$/\1/p' "$manifest" | head -n1)}
world=${world:-k8s-task-plugin}
case $world in
  webapi-task-plugin) default_wit=$here/../../wit/plugin-0.2 ;;
  *) default_wit=$here/../../wit/plugin ;;
esac
wit=$(cd "${WEFT_WIT:-$default_wit}" && pwd)
[ -f "$plugin_dir/$module.py" ] || [ -d "$plugin_dir/$module" ] || {
  echo "$plugin_dir: no module $module (looked for $module.py)" >&2; exit 1; }
# The manifest's top-level `name:` (quotes and a trailing comment stripped).
name=$(sed -n -E 's/^name:[[:space:]]*["'\'']?([A-Za-z0-9._-]+)["'\'']?[[:space:]]*(#.*)?$/\1/p' "$manifest" | head -n1)
[ -n "$name" ] || { echo "$manifest: no top-level name" >&2; exit 1; }

# setup.sh installs what is missing (once; it returns at once when present).
tools_ok() { command -v componentize-py >/dev/null && command -v wasm-tools >/dev/null; }
tools_ok || { bash "$here/setup.sh" >&2 && hash -r && tools_ok; } ||
  { echo "build: componentize-py or wasm-tools still not on PATH after $here/setup.sh" >&2; exit 1; }

out=$out_dir/$name.wasm
start=$(date +%s%N)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The guest sees each -p directory as it is: copy the plugin and the SDK,
# without __pycache__ (whose presence changes directory listings and lets
# CPython load stale bytecode), compiled bytecode, and the output directory
# when it lies inside the plugin's.
excludes=(--exclude=__pycache__ --exclude='*.pyc')
case "$out_dir/" in
  "$plugin_dir/") excludes+=(--exclude="./$name.wasm" --exclude="./$name.wasm.tmp" --exclude="./$name.yaml") ;;
  "$plugin_dir"/?*) excludes+=(--exclude="./${out_dir#"$plugin_dir"/}") ;;
esac
mkdir -p "$work/src/plugin" "$work/src/sdk"
(cd "$plugin_dir" && tar "${excludes[@]}" -cf - .) | (cd "$work/src/plugin" && tar -xf -)
(cd "$here" && tar "${excludes[@]}" -cf - weft_plugin) | (cd "$work/src/sdk" && tar -xf -)
# Runs at interpreter start-up (site.py), before the plugin is imported: no
# bytecode is read from or written to __pycache__ anywhere on the path (a
# virtualenv's site-packages included), so a second build compiles exactly
# what the first did, and nothing is written into the user's directories.
cat >"$work/src/sdk/sitecustomize.py" <<'PY'
import sys
sys.dont_write_bytecode = True
sys.pycache_prefix = "/weft-no-bytecode-cache"
PY
# The shim's seccomp filter outlives exec(2) while its SIGSYS handler does
# not, so it must be loaded into the process that runs wasmtime and into
# nothing that execs: the Python behind componentize-py's entry script, not
# a wrapper (pyenv's shim, `env python3`) in front of it.
cpy=$(command -v componentize-py)
if command -v pyenv >/dev/null && real=$(pyenv which componentize-py 2>/dev/null); then cpy=$real; fi
cpy_cmd=("$cpy") shim_ok=1
if [ "$(head -c2 "$cpy")" = '#!' ]; then
  read -r -a interp < <(head -n1 "$cpy" | cut -c3-)
  if [ "${interp[0]##*/}" = env ]; then
    interp=("${interp[@]:1}")
    [ "${interp[0]:-}" != -S ] || interp=("${interp[@]:1}")
    interp[0]=$(command -v "${interp[0]:-python3}" || true)
  fi
  # The interpreter may be a wrapper too (pyenv's python3 shim): ask it.
  case ${interp[0]##*/} in
    python*) if py=$("${interp[@]}" -c 'import sys; print(sys.executable)') && [ -x "$py" ]; then
               cpy_cmd=("$py" "${interp[@]:1}" "$cpy")
             else
               shim_ok=0
             fi ;;
    *) shim_ok=0 ;;
  esac
elif [ "$(head -c4 "$cpy")" != $'\x7fELF' ]; then
  shim_ok=0
fi
# -p: the plugin's own directory, then the SDK, then the site-packages
# componentize-py would add itself (so that pure-Python dependencies
# installed there are bundled too): an active virtualenv's (or pipenv's),
# else python3's and the user's. componentize-py finds the latter by running
# python3, which it must not do under the shim; build.sh asks python3 instead
# and hands componentize-py an empty virtualenv to look into.
paths=(-p "$work/src/plugin" -p "$work/src/sdk")
repro=()
if [ "$shim_ok" = 1 ] && shim=$(repro_shim "$work"); then
  if [ -z "${VIRTUAL_ENV:-}" ] && command -v pipenv >/dev/null &&
      venv=$(pipenv --venv 2>/dev/null) && [ -d "$venv" ]; then
    export VIRTUAL_ENV=$venv
  fi
  if [ -z "${VIRTUAL_ENV:-}" ]; then
    site=$(python3 -c 'import site; list = site.getsitepackages(); list.insert(0, site.getusersitepackages()); print(";".join(list))' 2>/dev/null || true)
    IFS=';' read -r -a sites <<<"$site"
    for d in ${sites[@]+"${sites[@]}"}; do
      [ ! -d "$d" ] || paths+=(-p "$d")
    done
    mkdir -p "$work/no-venv/lib/site-packages"
    export VIRTUAL_ENV=$work/no-venv
  fi
  repro=(env "LD_PRELOAD=$shim${LD_PRELOAD:+:$LD_PRELOAD}" "WEFT_REPRO_SEED=$(repro_seed "$work/src")"
    "SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-315532800}")
elif [ "$shim_ok" = 0 ]; then
  echo "warning: $cpy is neither a Python script nor a binary: this build is not byte-reproducible" >&2
fi
# The same stdio whoever runs the build: CPython sets up sys.stdin/stdout/
# stderr from what those are (a terminal, a pipe, /dev/null, a file) while
# componentize-py snapshots it, so a caller's stdin or stdout used to change
# the digest (a `while read` loop's here-string in .ci/build-sdk-examples.sh,
# a log file in .ci/check-reproducible.sh). Its output is shown afterwards.
log=$work/componentize.log
if ! ${repro[@]+"${repro[@]}"} "${cpy_cmd[@]}" -q -d "$wit" -w "$world" componentize "$module" \
    "${paths[@]}" -o "$out.tmp" </dev/null >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
cat "$log"
wasm-tools validate "$out.tmp"
mv "$out.tmp" "$out"
cp "$manifest" "$out_dir/$name.yaml"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
printf '%s: %s bytes, built in %d.%ds\n' "$out" "$(stat -c %s "$out")" $((ms / 1000)) $((ms % 1000 / 100))
echo "$out_dir/$name.yaml: manifest"
