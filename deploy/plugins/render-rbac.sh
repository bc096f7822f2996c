#!/usr/bin/env bash
# Renders the first-party task plugins' ServiceAccounts and ClusterRoles
# (`weft plugin rbac`, from each plugins/*/weft-plugin.yaml) into deploy/:
#
#   deploy/base/plugin-pod-rbac.yaml                 the pod plugin (baked into the image)
#   deploy/components/spark/plugin-rbac.yaml         with the spark Component
#   deploy/components/k8s-resource/plugin-rbac.yaml  with the k8s-resource Component
#
# The controller (--impersonate-plugins) writes each plugin's resources as
# that plugin's ServiceAccount, so these grant exactly the declared kinds.
# Run it after changing a manifest's `resources`; tests/deploy.rs fails
# while a committed file differs from what this renders.
#
# Environment: WEFT (the weft binary, default target/debug/weft).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
weft=${WEFT:-$root/target/debug/weft}
[ -x "$weft" ] || { echo "render-rbac.sh: $weft: no weft binary (cargo build -p weft, or set WEFT)" >&2; exit 1; }
render() { "$weft" plugin rbac "$root/plugins/$1/weft-plugin.yaml" -n weft-system >"$root/$2"; echo "  $2"; }
render pod deploy/base/plugin-pod-rbac.yaml
render spark deploy/components/spark/plugin-rbac.yaml
render k8s-resource deploy/components/k8s-resource/plugin-rbac.yaml
