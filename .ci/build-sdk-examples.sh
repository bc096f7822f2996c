#!/usr/bin/env bash
# Builds each SDK's example plugin from source into target/sdk-examples:
#   c-configmap (sdk/c), py-rayjob (sdk/python), js-job (sdk/js), and each
#   SDK's isolation guest (c-leak, py-leak, js-leak: host/weft/tests/isolation.rs);
#   the JS ones also with SpiderMonkey (QuickJS is the default), into
#   target/sdk-examples/starlingmonkey/.
# Each SDK's setup.sh installs its toolchain (zig and wasm-tools from PyPI
# plus wit-bindgen-cli from crates.io for C; componentize-py from PyPI;
# componentize-js from npm) and returns at once when it is there. An
# example is rebuilt only when its sources or its SDK changed (a stamp of
# their contents, the SDK's setup.sh with its pinned tool versions
# included), so a second run takes seconds. Each build is also kept under
# its stamp in $WEFT_BUILD_CACHE/sdk-examples (default
# ~/.cache/weft/build): the builds are byte-reproducible
# (.ci/check-reproducible.sh checks it), so a clean clone takes an earlier
# build of the same sources instead of spending ~20 s per component again.
set -euo pipefail
# Any failing command says where it failed, whoever hides this script's stdout.
trap 'echo "$0: line $LINENO: \`$BASH_COMMAND\` failed (status $?)" >&2' ERR
cd "$(dirname "$0")/.."
out=target/sdk-examples
cache=${WEFT_BUILD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/weft/build}/sdk-examples
mkdir -p "$out"
start=$(date +%s)

# lang  example-dir                       component  [JS engine: into $out/<engine>]
examples="c sdk/c/examples/configmap-writer c-configmap
python sdk/python/examples/rayjob py-rayjob
js sdk/js/examples/k8s-job js-job
c sdk/c/tests/leak c-leak
python sdk/python/tests/leak py-leak
js sdk/js/tests/leak js-leak
js sdk/js/examples/k8s-job js-job starlingmonkey
js sdk/js/tests/leak js-leak starlingmonkey"

while read -r lang dir name engine; do
  dest=$out${engine:+/$engine}
  mkdir -p "$dest"
  stamp_file="$dest/$name.stamp"
  # The SDK's sources and the example's, without installed or built files,
  # and what the Python and JS builds share (sdk/repro.sh, sdk/repro-shim.c).
  stamp=$(find "sdk/$lang" wit/plugin sdk/repro.sh sdk/repro-shim.c -type f \
      -not -path '*/node_modules/*' -not -path '*/out/*' -not -path '*/__pycache__/*' \
      -not -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-64)
  if [ -f "$dest/$name.wasm" ] && [ "$(cat "$stamp_file" 2>/dev/null)" = "$stamp" ]; then
    printf '  %-44s %9d bytes  (up to date)\n' "$dest/$name.wasm" "$(stat -c %s "$dest/$name.wasm")"
    continue
  fi
  kept=$cache/$name${engine:+-$engine}-$stamp
  how="built"
  if [ -f "$kept/$name.wasm" ] && [ -f "$kept/$name.yaml" ]; then
    how="kept build of the same sources"
  else
    QUIET=1 bash "sdk/$lang/setup.sh" >/dev/null
    rm -rf "$kept.tmp" && mkdir -p "$kept.tmp"
    WEFT_JS_ENGINE=${engine:-} bash "sdk/$lang/build.sh" "$dir" "$kept.tmp" >/dev/null
    rm -rf "$kept" && mv "$kept.tmp" "$kept"
  fi
  cp "$kept/$name.wasm" "$kept/$name.yaml" "$dest/"
  # Older builds of this example not used for two weeks go.
  touch "$kept"
  find "$cache" -maxdepth 1 -type d -regextype posix-extended \
    -regex ".*/$name${engine:+-$engine}-[0-9a-f]{64}" -mtime +14 -exec rm -rf {} +
  echo "$stamp" >"$stamp_file"
  printf '  %-44s %9d bytes  (%s)\n' "$dest/$name.wasm" "$(stat -c %s "$dest/$name.wasm")" "$how"
done <<<"$examples"
echo "sdk examples: built in $(($(date +%s) - start))s"
