#!/usr/bin/env bash
# A real OpenID Connect provider on loopback for the authentication tests
# (tests/auth_*.rs): the npm package oidc-provider, pinned in
# tests/support/oidc/package-lock.json, run by tests/support/oidc/provider.mjs
# with the machine's Node.js (tests/support/OIDC.md).
#
#   oidc.sh install     npm ci in tests/support/oidc when its node_modules is missing
#                       or older than package-lock.json (a no-op check when it is there)
#   oidc.sh selftest    install, then run tests/support/oidc/selftest.mjs: every flow
#                       the tests use, by HTTP, against a provider of its own
#
# The tests start the provider themselves, one per test file:
#   node tests/support/oidc/provider.mjs CONFIG.json   (prints `ready ISSUER_URL`)
set -euo pipefail
trap 'echo "$0: line $LINENO: \`$BASH_COMMAND\` failed (status $?)" >&2' ERR

here=$(cd "$(dirname "$0")" && pwd)
dir=$here/oidc
# Written after a successful `npm ci` only; `npm ci` removes node_modules first, so a
# failed or interrupted install leaves no stamp and the next call installs again.
stamp=$dir/node_modules/.weft-npm-ci

die() {
	echo "oidc.sh: $*" >&2
	exit 1
}

installed() {
	[ -f "$stamp" ] && [ "$stamp" -nt "$dir/package-lock.json" ] && [ -f "$dir/node_modules/oidc-provider/package.json" ]
}

install() {
	installed && return 0
	command -v node >/dev/null 2>&1 || die "no node (Node.js 20 or later; Debian: apt-get install nodejs npm)"
	command -v npm >/dev/null 2>&1 || die "no npm (Debian: apt-get install npm)"
	local major
	major=$(node -p 'process.versions.node.split(".")[0]')
	[ "$major" -ge 20 ] || die "Node.js $(node --version) is too old: 20 or later is needed"
	# One install at a time for this tree (test files may call this in parallel).
	exec 9>"/tmp/weft-oidc-install-$(printf '%s' "$dir" | cksum | cut -d' ' -f1).lock"
	flock 9
	installed && return 0
	echo "oidc.sh: npm ci in $dir" >&2
	(cd "$dir" && npm ci --no-audit --no-fund >&2) || die "npm ci in $dir failed"
	[ -f "$dir/node_modules/oidc-provider/package.json" ] || die "npm ci installed no oidc-provider in $dir/node_modules"
	touch "$stamp"
}

case "${1:-}" in
install) install ;;
selftest) install; cd "$dir" && node selftest.mjs ;;
*) die "usage: $0 install | selftest" ;;
esac
