#!/usr/bin/env bash
# Builds a C task plugin into a Weft plugin component.
#
#   sdk/c/build.sh <plugin-dir> <out-dir>
#
# <plugin-dir> holds the plugin's .c (and .h) files and its weft-plugin.yaml;
# the result is <out-dir>/<name>.wasm and <out-dir>/<name>.yaml, <name> being
# the manifest's. Steps: generate the C bindings of the world
# `k8s-task-plugin` (wit-bindgen c), compile the plugin, the bindings and the
# SDK with zig cc for wasm32-wasi as a reactor (-Os), wrap the core module
# into a component with the WASI preview1 reactor adapter, validate it, and
# check that it exports weft:plugin/k8s-task and imports nothing but
# weft:plugin and WASI interfaces.
#
# Environment: CFLAGS (extra compiler flags, e.g. -DNDEBUG or -Werror),
# WEFT_C_STACK_SIZE (bytes of stack; default 262144), WEFT_WIT (the WIT
# folder; default: this repository's wit/plugin).
# Tools come from sdk/c/setup.sh, which this script runs when needed.
set -euo pipefail
sdk=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 2 ] || { echo "usage: $0 <plugin-dir> <out-dir>" >&2; exit 2; }
plugin=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
wit=${WEFT_WIT:-$sdk/../../wit/plugin}
world=k8s-task-plugin
stack=${WEFT_C_STACK_SIZE:-262144}

# Tools: recorded by setup.sh; (re)run it when the record is missing or stale.
tools_env=${WEFT_C_SDK_CACHE:-$HOME/.cache/weft-c-sdk}/tools.env
tools_ok() {
  [ -f "$tools_env" ] || return 1
  # shellcheck source=/dev/null
  source "$tools_env"
  [ -x "${WEFT_C_ZIG:-}" ] && [ -x "${WEFT_C_WIT_BINDGEN:-}" ] && [ -x "${WEFT_C_WASM_TOOLS:-}" ] && [ -f "${WEFT_C_ADAPTER:-}" ]
}
tools_ok || { QUIET=${QUIET:-} bash "$sdk/setup.sh" && tools_ok; } || { echo "build: tools missing; run sdk/c/setup.sh" >&2; exit 1; }

manifest=$plugin/weft-plugin.yaml
[ -f "$manifest" ] || { echo "build: $manifest: no manifest" >&2; exit 1; }
name=$(sed -n 's/^name:[[:space:]]*["'\'']\{0,1\}\([^"'\'' #]*\).*/\1/p' "$manifest" | head -n1)
mworld=$(sed -n 's/^world:[[:space:]]*\([^ #]*\).*/\1/p' "$manifest" | head -n1)
[ -n "$name" ] || { echo "build: $manifest: no name" >&2; exit 1; }
[ "$mworld" = "$world" ] || { echo "build: $manifest: world is '$mworld'; the C SDK builds $world plugins" >&2; exit 1; }
shopt -s nullglob
sources=("$plugin"/*.c)
[ ${#sources[@]} -gt 0 ] || { echo "build: no .c files in $plugin" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 1. Bindings: k8s_task_plugin.{c,h} and the component-type object.
if ! log=$("$WEFT_C_WIT_BINDGEN" c "$wit" --world "$world" --out-dir "$tmp/bindings" 2>&1); then
  echo "$log" >&2
  exit 1
fi

# 2. The core module: a WASI reactor (no main; the exports are the entry points).
# The stack is set explicitly: zig's default (16 MiB) alone would exceed a
# 16Mi memory limit. Initial memory = data + stack, about 5 pages.
# shellcheck disable=SC2086
"$WEFT_C_ZIG" cc --target=wasm32-wasi -mexec-model=reactor -Os -std=c11 -Wall -Wextra \
  -Wno-unused-parameter -s -Wl,-z,stack-size="$stack" ${CFLAGS:-} \
  -I "$sdk" -I "$tmp/bindings" -I "$plugin" \
  "${sources[@]}" "$sdk/weft_plugin.c" "$sdk/weft_json.c" \
  "$tmp/bindings/k8s_task_plugin.c" "$tmp/bindings/k8s_task_plugin_component_type.o" \
  -o "$tmp/core.wasm"

# 3. The component, through the preview1 -> preview2 reactor adapter.
"$WEFT_C_WASM_TOOLS" component new "$tmp/core.wasm" \
  --adapt "wasi_snapshot_preview1=$WEFT_C_ADAPTER" -o "$tmp/$name.wasm"
"$WEFT_C_WASM_TOOLS" validate "$tmp/$name.wasm"

# 4. It must be what the manifest says, and reach for nothing else.
wit_text=$("$WEFT_C_WASM_TOOLS" component wit "$tmp/$name.wasm")
exports=$(sed -n 's/^ *export \([^;]*\);$/\1/p' <<<"$wit_text" | tr '\n' ' ')
stray=$(sed -n 's/^ *import \([^;]*\);$/\1/p' <<<"$wit_text" | grep -Ev '^(weft:plugin/|wasi:)' | tr '\n' ' ' || true)
if [ "$exports" != "weft:plugin/k8s-task@0.1.0 " ] || [ -n "$stray" ]; then
  echo "build: $name: exports [$exports] (want weft:plugin/k8s-task@0.1.0), unexpected imports [$stray]" >&2
  exit 1
fi

mv "$tmp/$name.wasm" "$out/$name.wasm"
cp "$manifest" "$out/$name.yaml"
printf '%s/%s.wasm: %d bytes (%s)\n' "$out" "$name" "$(stat -c %s "$out/$name.wasm")" "$world"
