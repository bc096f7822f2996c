#!/usr/bin/env bash
# Builds a JavaScript Weft plugin into a WebAssembly component.
#
#   sdk/js/build.sh <plugin-dir> <out-dir> [entry]
#
# <plugin-dir> holds the entry module (default plugin.js, which exports
# `k8sTask = definePlugin({...})`, or for a web-API plugin
# `webapiTask = defineWebApiPlugin({...})`; it imports the SDK as `weft-plugin-sdk`
# and may import relative modules and npm packages: bundle.mjs bundles them)
# and its weft-plugin.yaml. Writes <out-dir>/<name>.wasm and
# <out-dir>/<name>.yaml, <name> being the manifest's `name`, then validates
# the component with wasm-tools.
#
# The manifest's `world:` picks the WIT: webapi-task-plugin builds against
# wit/plugin-0.2 (weft:plugin@0.2.0, with wasi:http and fetch), every other
# world against wit/plugin (0.1.0).
#
# Environment: WEFT_WIT (default: the repo's wit/plugin, or wit/plugin-0.2 for
# webapi-task-plugin), WEFT_WORLD (default: the manifest's world, else
# k8s-task-plugin), SOURCE_DATE_EPOCH (the build-time clock, default
# 315532800), WEFT_REPRODUCIBLE=0 (skip sdk/repro-shim.c), CC (default: cc).
#
# Reproducible: the same sources give a byte-identical component (see README,
# "Reproducible builds").
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../repro.sh
. "$here/../repro.sh"
usage() { echo "usage: $0 <plugin-dir> <out-dir> [entry.js]" >&2; exit 64; }
[ $# -ge 2 ] || usage
plugin_dir=$(cd "$1" && pwd)
mkdir -p "$2"
out_dir=$(cd "$2" && pwd)
entry=$plugin_dir/${3:-plugin.js}
manifest=$plugin_dir/weft-plugin.yaml
[ -f "$manifest" ] || { echo "$manifest: missing" >&2; exit 1; }
# The world: WEFT_WORLD, else the manifest's top-level `world:`, else
# k8s-task-plugin. webapi-task-plugin is new in weft:plugin@0.2.0
# (wit/plugin-0.2, with wasi:http); the other worlds build against 0.1.0 as
# they always have.
world=${WEFT_WORLD:-$(sed -n -E 's/^world:[[:space:]]*["'\'']?([a-z0-9-]+)["'\'']?[[:space:]]*(#.*)?$/\1/p' "$manifest" | head -n1)}
world=${world:-k8s-task-plugin}
case $world in
  webapi-task-plugin) default_wit=$here/../../wit/plugin-0.2
    # fetch() is StarlingMonkey's over wasi:http/outgoing-handler, which
    # this world imports: keep it; only the incoming handler goes.
    disable=(fetch-event) ;;
  *) default_wit=$here/../../wit/plugin
    # Without them the component imports wasi:http, which only a
    # webapi-task-plugin may.
    disable=(http fetch-event) ;;
esac
wit=$(cd "${WEFT_WIT:-$default_wit}" && pwd)
# The engine (WEFT_JS_ENGINE): QuickJS (componentize-qjs, its non-async
# runtime; the default, 4-6x cheaper a call) or SpiderMonkey
# (ComponentizeJS's StarlingMonkey). See README, "Engines". A web-API
# plugin may await fetch: StarlingMonkey only.
case $world in
  webapi-task-plugin) default_engine=starlingmonkey ;;
  *) default_engine=quickjs ;;
esac
engine=${WEFT_JS_ENGINE:-$default_engine}
case $engine in
  starlingmonkey|spidermonkey) engine=starlingmonkey ;;
  quickjs)
    [ "$world" != webapi-task-plugin ] || {
      echo "WEFT_JS_ENGINE=quickjs: a $world component needs StarlingMonkey (its calls may await fetch, which QuickJS's non-async runtime cannot)" >&2
      exit 1
    } ;;
  *) echo "WEFT_JS_ENGINE=$engine: unknown engine (quickjs or starlingmonkey)" >&2; exit 64 ;;
esac
[ -f "$entry" ] || { echo "$entry: missing" >&2; exit 1; }
# The manifest's top-level `name:` (quotes and a trailing comment stripped).
name=$(sed -n -E 's/^name:[[:space:]]*["'\'']?([A-Za-z0-9._-]+)["'\'']?[[:space:]]*(#.*)?$/\1/p' "$manifest" | head -n1)
[ -n "$name" ] || { echo "$manifest: no top-level name" >&2; exit 1; }

cjs=$here/node_modules/.bin/componentize-js
# The toolchain lives in sdk/js/node_modules, which a fresh clone lacks:
# setup.sh installs it (once; it returns at once when it is present).
tools_ok() { [ -x "$cjs" ] && [ -f "$here/node_modules/componentize-qjs/cli.mjs" ] && command -v wasm-tools >/dev/null; }
tools_ok || { bash "$here/setup.sh" >&2 && tools_ok; } ||
  { echo "build: the JavaScript toolchain is missing after $here/setup.sh (componentize-js, componentize-qjs, wasm-tools)" >&2; exit 1; }

out=$out_dir/$name.wasm
start=$(date +%s%N)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/src"
# One ES module: the entry, its relative imports, its npm packages and the
# SDK (imported as `weft-plugin-sdk`); the host's weft:plugin/* (and, in
# webapi-task-plugin, wasi:http/*) stay imports.
node "$here/bundle.mjs" "$entry" "$tmp/src/bundle.js" "$world"

# done: validates the component and puts it and the manifest in place.
done_build() {
  wasm-tools validate "$out.tmp"
  mv "$out.tmp" "$out"
  cp "$manifest" "$out_dir/$name.yaml"
  local ms=$(( ($(date +%s%N) - start) / 1000000 ))
  printf '%s: %s bytes (%s), built in %d.%ds\n' "$out" "$(stat -c %s "$out")" "$engine" $((ms / 1000)) $((ms % 1000 / 100))
  echo "$out_dir/$name.yaml: manifest"
}

if [ "$engine" = quickjs ]; then
  qjs=$here/node_modules/componentize-qjs/cli.mjs
  [ -f "$qjs" ] || { echo "componentize-qjs not installed: run $here/setup.sh" >&2; exit 1; }
  # componentize-qjs pre-initialises in its own process (no wizer to
  # wrap), so the reproducibility shim goes into that node process, which
  # execs nothing. --disable-gc: an instance serves one call and is reset,
  # so a collection in a call is work for nothing (reference counting
  # still frees acyclic garbage; the memory limit still applies).
  repro_env=()
  if shim=$(repro_shim "$tmp"); then
    repro_env=("LD_PRELOAD=$shim" "WEFT_REPRO_SEED=$(repro_seed "$tmp/src")"
      "SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-315532800}" WEFT_REPRO_UNSET=1)
  fi
  (cd "$tmp/src" && env ${repro_env[@]+"${repro_env[@]}"} "$(command -v node)" "$qjs" \
    --sync --disable-gc --wit "$wit" --world "$world" --js bundle.js -o "$out.tmp" >"$tmp/qjs.log" 2>&1) || {
    cat "$tmp/qjs.log" >&2
    exit 1
  }
  done_build
  exit 0
fi
# Reproducible builds: wizer runs the bundle's top level in SpiderMonkey and
# snapshots the engine's memory, so whatever it saw of the host ends up in
# the component. What varies from build to build:
#  - paths: ComponentizeJS passes the guest the bundle's directory (as a
#    relative path when it is the working directory: hence `cd $tmp/src`, but
#    also as --strip-path-prefix) and its own work directory,
#    $TMPDIR/<random>/sources, as a preopened directory and in the arguments
#    on wizer's stdin; the wrapper below (--wizer-bin) rewrites both.
#  - random bytes (SpiderMonkey's hash and Math.random seeds), clocks, file
#    metadata and directory order: the wrapper runs wizer, and only wizer
#    (the shim must not be in a process that execs), under sdk/repro-shim.c.
real_wizer=$(cd "$here" && node --input-type=module -e \
  "import w from '@bytecodealliance/wizer'; process.stdout.write(w)")
[ -x "$real_wizer" ] || { echo "wizer not found ($real_wizer): run $here/setup.sh" >&2; exit 1; }
repro_env=()
if shim=$(repro_shim "$tmp"); then
  # WEFT_REPRO_UNSET: the shim removes its variables from wizer's
  # environment, which wizer passes on to the guest (--inherit-env).
  repro_env=("LD_PRELOAD=$shim" "WEFT_REPRO_SEED=$(repro_seed "$tmp/src")"
    "SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-315532800}" WEFT_REPRO_UNSET=1)
fi
# ComponentizeJS spawns the wrapper with only its own variables (no PATH), so
# everything the wrapper needs is written into it.
{
  printf '#!%s\n' "$(command -v bash)"
  printf 'real_wizer=%q\n' "$real_wizer"
  printf 'repro_env=(%s)\n' "${repro_env[*]@Q}"
  cat <<'SH'
set -euo pipefail
# $work: ComponentizeJS's work directory, given as --dir=<work>; $src: the
# bundle's directory, given as --mapdir=/::<src> (the guest sees it as /).
args=() work= src=
for a in "$@"; do
  case $a in
    --dir=*/sources) work=${a#--dir=}; args+=("--mapdir=/weft-componentize::$work") ;;
    --mapdir=/::*) src=${a#--mapdir=/::}; args+=("$a") ;;
    *) args+=("$a") ;;
  esac
done
# The arguments for the guest, on stdin: --initializer-script-path
# <work>/initializer.js --strip-path-prefix <src>/ bundle.js. Both become the
# guest's view of those directories: /weft-componentize/ and /.
input=$(cat)
[ -z "$work" ] || input=${input//"$work/"//weft-componentize/}
[ -z "$src" ] || input=${input//"$src/"//}
# bash's own variables (PWD, SHLVL, _) must not reach the guest either.
printf '%s' "$input" | env -u PWD -u OLDPWD -u SHLVL -u _ ${repro_env[@]+"${repro_env[@]}"} \
  "$real_wizer" "${args[@]}"
SH
} >"$tmp/wizer"
chmod +x "$tmp/wizer"
# -d (see $disable above): the entry comes first, -d takes several values.
(cd "$tmp/src" && "$cjs" bundle.js --wit "$wit" --world-name "$world" -o "$out.tmp" \
  --wizer-bin "$tmp/wizer" -d "${disable[@]}")
done_build
