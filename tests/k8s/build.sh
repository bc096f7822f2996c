#!/usr/bin/env bash
# Builds the real control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok) from their Go modules with the ordinary `go` client,
# into a per-machine cache outside the work tree keyed by versions.env:
#   ${WEFT_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/weft/k8s}/<key>/bin
# A second run only checks the stamp and prints the directory (seconds).
# Prints the bin directory on its last line; every failure says which step.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$HERE/versions.env"
fail() { echo "tests/k8s/build.sh: $*" >&2; exit 1; }
key=$(sha256sum <"$HERE/versions.env" | cut -c1-16)
ROOT=${WEFT_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/weft/k8s}
DIR=$ROOT/$KUBE_VERSION-$key
OUT=$DIR/bin
if [ -f "$DIR/done" ]; then echo "$OUT"; exit 0; fi
# The Go of this kind of machine lives in /usr/local/go (also when a
# non-login shell's PATH lacks it).
command -v go >/dev/null || [ ! -x /usr/local/go/bin/go ] || PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || fail "no 'go' on PATH: the control plane is built from Go modules (Go >= 1.25)"
command -v python3 >/dev/null || fail "no python3 on PATH (reads 'go mod download -json')"
WORK=$DIR/mod
mkdir -p "$OUT" "$WORK"
export GOTOOLCHAIN=local GOFLAGS="-modcacherw -buildvcs=false" CGO_ENABLED=0
log() { echo "[k8s build $(date +%T)] $*" >&2; }

modjson() { (cd "$WORK" && go mod download -json "$1") || fail "the module proxy did not serve $1"; }
field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

# --- kube-apiserver, kube-controller-manager, kube-scheduler ---------------
# k8s.io/kubernetes requires its staging modules at v0.0.0 and maps them to
# ./staging in its own go.mod; those replaces act only there, so this module
# maps each one to its published v0.X.Y, the list read from the release's go.mod.
K=$WORK/kubernetes
if [ ! -f "$K/go.sum" ]; then
  log "resolving k8s.io/kubernetes@$KUBE_VERSION"
  mkdir -p "$K"
  kmod=$(modjson "k8s.io/kubernetes@$KUBE_VERSION" | field GoMod)
  mapfile -t mods < <(grep -oE 'k8s\.io/[A-Za-z0-9._/-]+[[:space:]]+=>[[:space:]]+\./staging/' "$kmod" | awk '{print $1}' | sort -u)
  [ "${#mods[@]}" -gt 20 ] || fail "read ${#mods[@]} staging modules from $kmod; expected about 31"
  staging="v0.${KUBE_VERSION#v1.}"
  {
    echo "module local.invalid/k8s-bins"; echo
    grep -E '^go [0-9]' "$kmod"
    grep -E '^godebug ' "$kmod" || true
    echo; echo "replace ("
    for m in "${mods[@]}"; do printf '\t%s => %s %s\n' "$m" "$m" "$staging"; done
    echo ")"
  } >"$K/go.mod"
  (cd "$K" && go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@$KUBE_VERSION" \
      "k8s.io/kubernetes/cmd/kube-controller-manager@$KUBE_VERSION" \
      "k8s.io/kubernetes/cmd/kube-scheduler@$KUBE_VERSION" && go mod tidy) \
    || fail "resolving k8s.io/kubernetes@$KUBE_VERSION with ${#mods[@]} staging replaces ($K/go.mod)"
fi
minor=$(cut -d. -f2 <<<"$KUBE_VERSION")
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
  ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
log "building kube-apiserver, kube-controller-manager, kube-scheduler $KUBE_VERSION"
(cd "$K" && go build -trimpath -pgo=off -ldflags "$ld" -o "$OUT/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler) || fail "go build of the Kubernetes binaries failed"

# --- etcd: server/go.mod has replaces too, so it is built inside a module ----
E=$WORK/etcd
if [ ! -f "$E/go.sum" ]; then
  log "resolving go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  mkdir -p "$E"
  (cd "$E" && { [ -f go.mod ] || go mod init local.invalid/etcd-bin; } \
      && go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION" && go mod tidy) \
    || fail "resolving go.etcd.io/etcd/server/v3@$ETCD_VERSION"
fi
log "building etcd $ETCD_VERSION"
(cd "$E" && go build -trimpath -ldflags "-s -w" -o "$OUT/etcd" go.etcd.io/etcd/server/v3) \
  || fail "go build of etcd failed"

# --- kwok: no replaces, a plain go install ---------------------------------
log "building kwok $KWOK_VERSION"
GOBIN=$OUT go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" \
  || fail "go install sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION failed"
kdir=$(modjson "sigs.k8s.io/kwok@$KWOK_VERSION" | field Dir)
mkdir -p "$OUT/kwok-stages"
for f in node/fast/node-initialize.yaml pod/fast/pod-ready.yaml pod/fast/pod-delete.yaml; do
  cp "$kdir/kustomize/stage/$f" "$OUT/kwok-stages/" || fail "kwok $KWOK_VERSION ships no kustomize/stage/$f"
done
chmod u+w "$OUT/kwok-stages/"*.yaml

for b in etcd kube-apiserver kube-controller-manager kube-scheduler kwok; do
  [ -x "$OUT/$b" ] || fail "$OUT/$b was not built"
done
cp "$HERE/versions.env" "$DIR/versions.env"
touch "$DIR/done"
# Builds of other pins are stale: keep the cache to one control plane.
for other in "$ROOT"/*/; do
  [ "${other%/}" = "$DIR" ] || { log "removing the stale build ${other%/}"; rm -rf "${other%/}"; }
done
log "done: $(du -sh "$OUT" | cut -f1) in $OUT"
echo "$OUT"
