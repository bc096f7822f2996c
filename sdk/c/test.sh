#!/usr/bin/env bash
# Native unit tests of the C SDK's JSON reader/writer, under AddressSanitizer
# and UBSan when the host compiler has them. Prints "N passed, N failed".
set -euo pipefail
sdk=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cc=${CC:-cc}
flags=(-std=c11 -Wall -Wextra -g)
if echo 'int main(void){return 0;}' | "$cc" -x c - -fsanitize=address,undefined -o "$out/probe" 2>/dev/null; then
  flags+=(-fsanitize=address,undefined -fno-sanitize-recover=all)
fi
"$cc" "${flags[@]}" -o "$out/json_test" "$sdk/tests/json_test.c" "$sdk/weft_json.c"
"$out/json_test"
