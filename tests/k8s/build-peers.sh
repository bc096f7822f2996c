#!/usr/bin/env bash
# Builds the peer controllers of `make bench-peers` from their Go modules with
# the ordinary `go` client, into a per-machine cache outside the work tree
# keyed by peers.env:
#   ${WEFT_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/weft/k8s}/peers-<key>/
#     bin/workflow-controller      Argo's controller
#     argo-crds/*.yaml             the CRDs of the same module version
#     bin/flytepropeller           Flyte's propeller (tests/k8s/flyte/'s wrapper)
# A second run only checks the stamp and prints the directory (seconds).
# Prints the directory on its last line; every failure says which step.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=peers.env
source "$HERE/peers.env"
fail() { echo "tests/k8s/build-peers.sh: $*" >&2; exit 1; }
key=$(sha256sum <"$HERE/peers.env" | cut -c1-16)
ROOT=${WEFT_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/weft/k8s}
DIR=$ROOT/peers-$key
if [ -f "$DIR/done" ]; then echo "$DIR"; exit 0; fi
command -v go >/dev/null || [ ! -x /usr/local/go/bin/go ] || PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || fail "no 'go' on PATH: the peers are built from Go modules (Go >= 1.25)"
export GOTOOLCHAIN=local GOFLAGS="-modcacherw -buildvcs=false" CGO_ENABLED=0
log() { echo "[peers build $(date +%T)] $*" >&2; }
mkdir -p "$DIR/bin" "$DIR/argo-crds" "$DIR/mod"
(cd "$DIR/mod" && { [ -f go.mod ] || go mod init local.invalid/peers >/dev/null 2>&1; })

ARGO=github.com/argoproj/argo-workflows/v4
log "building Argo's workflow-controller $ARGO_VERSION"
GOBIN=$DIR/bin go install -trimpath -ldflags "-s -w -X $ARGO.version=$ARGO_VERSION" \
    "$ARGO/cmd/workflow-controller@$ARGO_VERSION" \
  || fail "go install $ARGO/cmd/workflow-controller@$ARGO_VERSION failed"
adir=$( (cd "$DIR/mod" && go mod download -json "$ARGO@$ARGO_VERSION") \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])') \
  || fail "the module proxy did not serve $ARGO@$ARGO_VERSION"
cp "$adir"/manifests/base/crds/full/argoproj.io_*.yaml "$DIR/argo-crds/" \
  || fail "$ARGO@$ARGO_VERSION ships no manifests/base/crds/full"
chmod u+w "$DIR/argo-crds/"*.yaml
[ -x "$DIR/bin/workflow-controller" ] || fail "$DIR/bin/workflow-controller was not built"

log "building Flyte's flytepropeller $FLYTE_VERSION (tests/k8s/flyte)"
rm -rf "$DIR/flyte-mod" && cp -r "$HERE/flyte" "$DIR/flyte-mod"
grep -q "flytepropeller $FLYTE_VERSION\$" "$DIR/flyte-mod/go.mod" \
  || fail "tests/k8s/flyte/go.mod does not pin flytepropeller $FLYTE_VERSION (peers.env)"
(cd "$DIR/flyte-mod" && go build -trimpath \
    -ldflags "-s -w -X github.com/flyteorg/flyte/flytestdlib/version.Version=$FLYTE_VERSION" \
    -o "$DIR/bin/flytepropeller" .) \
  || fail "go build of flytepropeller $FLYTE_VERSION (tests/k8s/flyte) failed"
cp "$HERE/peers.env" "$DIR/peers.env"
touch "$DIR/done"
for other in "$ROOT"/peers-*/; do
  [ "${other%/}" = "$DIR" ] || { log "removing the stale build ${other%/}"; rm -rf "${other%/}"; }
done
log "done: $(du -sh "$DIR/bin" | cut -f1) in $DIR"
echo "$DIR"
