#!/usr/bin/env bash
# Checks the container image without a container engine: runs the very
# build script deploy/image/Dockerfile runs (deploy/image/build.sh, with the
# plugins baked and the dev build CI already has: `make test` passes the
# binary its tests ran as WEFT_IMAGE_BIN; without it build.sh builds one),
# then checks the tree it makes against the Dockerfile (what its runtime
# stage copies and runs, as which user) and against
# deploy/base/deployment.yaml (what it mounts and passes, as which user).
set -euo pipefail
# Any failing command says where it failed, whoever hides this script's stdout.
trap 'echo "$0: line $LINENO: \`$BASH_COMMAND\` failed (status $?)" >&2' ERR
cd "$(dirname "$0")/.."

dockerfile=deploy/image/Dockerfile
deployment=deploy/base/deployment.yaml
plugins=(pod spark k8s-resource ray-job http auth-token request-id rate-limit audit)
fail() { echo "check-image: $*" >&2; exit 1; }

# The Dockerfile's instructions, one per line (continuations joined).
instructions=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$dockerfile" | grep -Ev '^[[:space:]]*(#|$)')
last_from=$(grep -n '^FROM ' <<<"$instructions" | tail -n1 | cut -d: -f1)
[ -n "$last_from" ] || fail "$dockerfile: no FROM"
runtime=$(tail -n +"$last_from" <<<"$instructions")
builder=$(head -n "$((last_from - 1))" <<<"$instructions")

# 1. The builder stage runs build.sh: what this script checks is what the
#    image holds.
invocation=$(grep -E '^RUN .*deploy/image/build\.sh' <<<"$builder" || true)
[ -n "$invocation" ] || fail "$dockerfile: no RUN of deploy/image/build.sh in the builder stage"
image_out=$(sed -E 's/.*deploy\/image\/build\.sh[[:space:]]+([^[:space:];&]+).*/\1/' <<<"$invocation")
case $image_out in /*) ;; *) fail "$dockerfile: cannot tell build.sh's OUT_DIR from: $invocation" ;; esac
echo "check-image: $dockerfile runs deploy/image/build.sh $image_out"

# 2. Build the tree as the Dockerfile would, outside a container.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rootfs=$tmp/rootfs
WEFT_IMAGE_PROFILE=dev WEFT_BAKE_PLUGINS=1 WEFT_IMAGE_BIN=${WEFT_IMAGE_BIN:-} bash deploy/image/build.sh "$rootfs"

# 3. Every path the runtime stage copies from the builder exists in the tree.
copies=$(grep -E '^COPY .*--from=builder' <<<"$runtime" || true)
[ -n "$copies" ] || fail "$dockerfile: the runtime stage copies nothing from the builder"
while read -r line; do
  # COPY [--flags...] SRC DEST
  read -r -a words <<<"$line"
  src=${words[${#words[@]} - 2]}
  case $src in
    "$image_out"/*) ;;
    *) fail "$dockerfile: '$line' copies from outside build.sh's $image_out" ;;
  esac
  [ -e "$rootfs${src#"$image_out"}" ] || fail "$dockerfile copies $src, which build.sh did not make"
done <<<"$copies"

# 4. The tree: the binary (the ENTRYPOINT), the first-party plugins, the directories.
entrypoint=$(grep -E '^ENTRYPOINT ' <<<"$runtime" | sed -E 's/^ENTRYPOINT \["([^"]+)".*/\1/')
[ "$entrypoint" = /usr/local/bin/weft ] || fail "$dockerfile: ENTRYPOINT is '$entrypoint', not /usr/local/bin/weft"
[ -x "$rootfs$entrypoint" ] || fail "$rootfs$entrypoint: not an executable"
for p in "${plugins[@]}"; do
  for ext in wasm yaml; do
    [ -s "$rootfs/var/lib/weft/plugins/$p.$ext" ] || fail "no /var/lib/weft/plugins/$p.$ext in the tree"
  done
done
# The directories the Deployment's --plugins and --cache-dir name (its /tmp
# is an emptyDir, its admin.yaml a ConfigMap).
for flag in plugins cache-dir; do
  dir=$(sed -n "s/^[[:space:]]*- --$flag=\(.*\)$/\1/p" "$deployment")
  [ -n "$dir" ] || fail "$deployment: no --$flag"
  [ -d "$rootfs$dir" ] || fail "$deployment passes --$flag=$dir, which the image does not have"
done
grep -q 'mountPath: /var/cache/weft$' "$deployment" || fail "$deployment: /var/cache/weft is not mounted"

# 5. The runtime user is the Deployment's.
user=$(grep -E '^USER ' <<<"$runtime" | tail -n1 | awk '{print $2}')
[ -n "$user" ] || fail "$dockerfile: the runtime stage sets no USER"
uid=${user%%:*}
gid=${user#*:}
[ "$gid" != "$user" ] || fail "$dockerfile: USER $user names no group (want UID:GID)"
for field in runAsUser runAsGroup; do
  if [ "$field" = runAsUser ]; then want=$uid; else want=$gid; fi
  values=$(sed -n "s/^[[:space:]]*$field:[[:space:]]*\([0-9]*\).*/\1/p" "$deployment" | sort -u)
  [ -n "$values" ] || fail "$deployment: no $field"
  [ "$values" = "$want" ] || fail "$dockerfile: USER $user, but $deployment has $field: $(tr '\n' ' ' <<<"$values")"
done

# 6. The binary needs only the libraries distroless/cc has.
if command -v ldd >/dev/null; then
  extra=$(ldd "$rootfs$entrypoint" | awk '{print $1}' |
    grep -Ev '^(linux-vdso\.so|(.*/)?ld-linux[^/]*|libc\.so|libm\.so|libgcc_s\.so|libpthread\.so|libdl\.so|librt\.so|libstdc\+\+\.so)' || true)
  [ -z "$extra" ] || fail "$entrypoint links libraries distroless/cc lacks: $extra"
fi

echo "check-image: ok: weft, ${#plugins[@]} plugins, /var/lib/weft/plugins and /var/cache/weft; USER $user matches $deployment"
