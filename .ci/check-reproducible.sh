#!/usr/bin/env bash
# Checks that the Python and JavaScript SDK builds are byte-reproducible:
# each example is built twice, once from the repository and once from a copy
# of its sources in another temporary directory (fresh mtimes, another
# working directory, another output directory), and the two components must
# have the same sha256. On a mismatch it names the example and the first
# differing byte offset, and fails (after checking every example).
#
#   .ci/check-reproducible.sh        (part of `make plugin-tests`)
#
# About a minute: ten builds of ~7 s (a k8s-task-plugin and a
# webapi-task-plugin example per SDK, and the JS k8s-task example with each
# engine). Nothing is written into the repository.
set -euo pipefail
# Any failing command says where it failed, whoever hides this script's stdout.
trap 'echo "$0: line $LINENO: \`$BASH_COMMAND\` failed (status $?)" >&2' ERR
cd "$(dirname "$0")/.."
unset WEFT_REPRODUCIBLE # the default build is what is checked
repo=$(pwd)
start=$(date +%s)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# lang  example-dir                       component  [JS engine]
examples="python sdk/python/examples/rayjob py-rayjob
js sdk/js/examples/k8s-job js-job
js sdk/js/examples/k8s-job js-job starlingmonkey
python sdk/python/examples/http-job py-http-job
js sdk/js/examples/http-job js-http-job"

failed=()
while read -r lang dir name engine; do
  bash "sdk/$lang/setup.sh" >/dev/null
  export WEFT_JS_ENGINE=${engine:-}
  label=$name${engine:+ ($engine)}
  work=$tmp/$name$engine
  a=$work/a b=$work/b copy=$work/elsewhere/src/$(basename "$dir")
  mkdir -p "$a" "$b" "$(dirname "$copy")"
  # First build: the sources where they are.
  if ! bash "sdk/$lang/build.sh" "$dir" "$a" >"$work/a.log" 2>&1; then
    echo "FAIL $label ($dir): the build failed:" >&2
    sed 's/^/  /' "$work/a.log" >&2
    failed+=("$label")
    continue
  fi
  # Second build: a copy (cp without -p: new inodes, fresh mtimes), built from
  # another working directory into another output directory.
  cp -R "$dir" "$copy"
  find "$copy" -exec touch {} +
  if ! (cd "$work/elsewhere" && bash "$repo/sdk/$lang/build.sh" "src/$(basename "$dir")" "$b") \
      >"$work/b.log" 2>&1; then
    echo "FAIL $label (copy of $dir): the build failed:" >&2
    sed 's/^/  /' "$work/b.log" >&2
    failed+=("$label")
    continue
  fi
  sum_a=$(sha256sum "$a/$name.wasm" | cut -c1-64)
  sum_b=$(sha256sum "$b/$name.wasm" | cut -c1-64)
  if [ "$sum_a" = "$sum_b" ]; then
    printf '  ok   %-30s %-32s sha256 %s (%d bytes)\n' "$label" "$dir" "$sum_a" "$(stat -c %s "$a/$name.wasm")"
    continue
  fi
  # cmp: "differ: byte N, line L" (N counts from 1) or "EOF on <file>" when
  # one is a prefix of the other.
  size_a=$(stat -c %s "$a/$name.wasm") size_b=$(stat -c %s "$b/$name.wasm")
  diff=$(cmp "$a/$name.wasm" "$b/$name.wasm" 2>&1 || true)
  if [[ $diff =~ byte\ ([0-9]+) ]]; then
    off=$((BASH_REMATCH[1] - 1))
  else
    off=$((size_a < size_b ? size_a : size_b))
  fi
  {
    echo "FAIL $label ($dir): not byte-reproducible"
    echo "  built from $dir: sha256 $sum_a, $size_a bytes"
    echo "  built from a copy in another directory: sha256 $sum_b, $size_b bytes"
    printf '  first difference at byte offset %d (0x%x)\n' "$off" "$off"
    echo "  see \"Reproducible builds\" in sdk/$lang/README.md"
  } >&2
  failed+=("$label")
done <<<"$examples"

echo "reproducible builds: checked in $(($(date +%s) - start))s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "not reproducible: ${failed[*]}" >&2
  exit 1
fi
