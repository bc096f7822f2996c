#!/usr/bin/env python3
"""`helm template` without a helm binary: renders a chart with Helm's own
engine (PyPI helm-python-sdk, a binding over Helm's Go SDK).

    python3 deploy/helm/template.py deploy/helm/weft -f deploy/helm/examples/production.yaml
    python3 deploy/helm/template.py deploy/helm/weft --set replicas=3 --include-crds | kubectl apply --server-side -f -

Prints the rendered objects as one YAML stream on stdout, each preceded by
`# Source: <template>`, in Helm's install order (Namespace first); empty
renders and NOTES.txt are left out. Before rendering it lints the chart and
checks the values against values.schema.json; for the repository's own chart
(deploy/helm/weft) it also checks that the copies the chart must carry
(crds/workflow.yaml, dashboards/weft-dashboard.json) are identical to
deploy/crds/workflow.yaml and deploy/grafana/weft-dashboard.json. Any
problem fails with a message naming the chart.

Needs: python3 -m pip install helm-python-sdk
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEPLOY = HERE.parent

# The chart files that are copies of files outside the chart (Helm cannot
# read outside the chart directory): chart path -> original.
COPIES = {
    "crds/workflow.yaml": DEPLOY / "crds" / "workflow.yaml",
    "crds/workflowtemplate.yaml": DEPLOY / "crds" / "workflowtemplate.yaml",
    "crds/cronworkflow.yaml": DEPLOY / "crds" / "cronworkflow.yaml",
    "crds/taskcache.yaml": DEPLOY / "crds" / "taskcache.yaml",
    "crds/lock.yaml": DEPLOY / "crds" / "lock.yaml",
    "dashboards/weft-dashboard.json": DEPLOY / "grafana" / "weft-dashboard.json",
}

# Helm's install order (pkg/release/util/kind_sorter.go): what `helm
# template` prints first. Unknown kinds go last.
INSTALL_ORDER = [
    "PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
    "PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret",
    "SecretList", "ConfigMap", "StorageClass", "PersistentVolume",
    "PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole",
    "ClusterRoleList", "ClusterRoleBinding", "ClusterRoleBindingList", "Role",
    "RoleList", "RoleBinding", "RoleBindingList", "Service", "DaemonSet", "Pod",
    "ReplicationController", "ReplicaSet", "Deployment", "HorizontalPodAutoscaler",
    "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService",
    "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
]


class Failure(Exception):
    """A problem to report (already worded for the user)."""


def import_helm():
    try:
        # Imported here, not at the top: --help and this message work without it.
        import helm_python
    except ImportError:
        raise Failure(
            "the Python package helm-python-sdk (Helm's Go SDK, import name helm_python) "
            "is not installed: python3 -m pip install helm-python-sdk "
            "(on a PEP 668 system Python: python3 -m pip install --user "
            "--break-system-packages helm-python-sdk)"
        ) from None
    return helm_python


@contextlib.contextmanager
def go_stderr():
    """Helm logs through Go's log/slog straight to file descriptor 2 (lint
    and render report each template `fail` at INFO, which the error says
    again): keep what it writes there, and pass on only what is not INFO or
    DEBUG."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            for line in captured.read().decode("utf-8", "replace").splitlines():
                if not re.search(r"\b(INFO|DEBUG)\b", line):
                    print(f"template.py: helm: {line}", file=sys.stderr)


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Helm's merge of values sources: maps merge key by key, anything else
    (lists included) is replaced; a null stays, to delete the default."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


def user_values(helm, args) -> dict[str, Any]:
    """-f files, then --set-json, --set and --set-string, in Helm's order."""
    values: dict[str, Any] = {}
    for f in args.values:
        try:
            text = sys.stdin.read() if f == "-" else Path(f).read_text()
        except OSError as e:
            raise Failure(f"values file {f}: {e.strerror}") from None
        try:
            parsed = helm.values_from_yaml(text) or {}
        except helm.HelmError as e:
            raise Failure(f"values file {f}: {e}") from None
        values = merge(values, parsed)
    for flag, parse, items in (
        ("--set-json", helm.parse_set_json, args.set_json),
        ("--set", helm.parse_set_string, args.set),
        ("--set-string", helm.parse_set_string_values, args.set_string),
    ):
        for expr in items:
            try:
                values = merge(values, parse(expr))
            except helm.HelmError as e:
                raise Failure(f"{flag} {expr}: {e}") from None
    return values


def check_copies(chart_dir: Path) -> None:
    """The repository's chart carries copies of files outside it: they must
    not drift from the originals."""
    if chart_dir.resolve() != (HERE / "weft").resolve():
        return
    root = DEPLOY.parent
    for inside, original in COPIES.items():
        copy = HERE / "weft" / inside
        if not original.exists():
            continue
        if not copy.exists() or copy.read_bytes() != original.read_bytes():
            raise Failure(
                f"chart {chart_dir}: {copy.relative_to(root)} is not a copy of "
                f"{original.relative_to(root)} (Helm cannot read outside the chart): "
                f"cp {original.relative_to(root)} {copy.relative_to(root)}"
            )


def split_documents(text: str) -> list[str]:
    """A rendered template's YAML documents, without the empty ones."""
    docs, current = [], []
    for line in text.splitlines():
        if line.rstrip() == "---" or line.startswith("--- "):
            docs.append("\n".join(current))
            current = []
        else:
            current.append(line)
    docs.append("\n".join(current))
    meaningful = []
    for d in docs:
        body = [line for line in d.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        if body:
            meaningful.append(d.strip("\n"))
    return meaningful


def kind_rank(kind: str) -> int:
    try:
        return INSTALL_ORDER.index(kind)
    except ValueError:
        return len(INSTALL_ORDER)


def run_helm(helm, chart_dir: Path, label: str, values: dict[str, Any], args):
    """Schema, lint and render, with Helm's Go engine. Returns the lint
    warnings, the rendered templates and the chart's CRDs."""
    try:
        chart = helm.Chart.load(chart_dir)
    except helm.HelmError as e:
        raise Failure(f"{label}: cannot load: {e}") from None
    with chart:
        try:
            chart.validate_schema(chart.merge_values(values))
        except helm.HelmError as e:
            raise Failure(f"{label}: values do not match values.schema.json: {e}") from None

        report = helm.lint(chart_dir, values, namespace=args.namespace)
        messages = report.get("messages") or []
        errors = [f"{m.get('path')}: {m.get('error')}".strip() for m in messages
                  if m.get("severity", 0) >= 3]
        # "errors" repeats the error messages, without their paths.
        errors = errors or [e.strip() for e in report.get("errors") or []]
        if errors:
            raise Failure(f"{label}: lint errors:\n" + "\n".join(f"  {e}" for e in errors))
        warnings = [f"{m.get('path')}: {m.get('error')}".strip() for m in messages
                    if m.get("severity") == 2]

        try:
            manifests = chart.render(values, name=args.name, namespace=args.namespace,
                                     is_install=True)
        except helm.HelmError as e:
            raise Failure(f"{label}: cannot render: {e}") from None
        return warnings, manifests, (chart.crds if args.include_crds else [])


def render(args) -> str:
    chart_dir = Path(args.chart)
    label = f"chart {args.chart}"
    if not (chart_dir / "Chart.yaml").is_file():
        raise Failure(f"{label}: no Chart.yaml there")
    check_copies(chart_dir)
    helm = import_helm()
    values = user_values(helm, args)
    try:
        helm.validate_release_name(args.name)
    except helm.HelmError as e:
        raise Failure(f"{label}: release name {args.name!r}: {e}") from None

    with go_stderr():
        warnings, manifests, crds = run_helm(helm, chart_dir, label, values, args)
    for w in warnings:
        print(f"template.py: {label}: lint warning: {w}", file=sys.stderr)

    out: list[tuple[int, int, str, str]] = []
    for crd in crds:
        for doc in split_documents(crd["data"]):
            out.append((-1, len(out), crd["filename"], doc))
    for source in sorted(manifests):
        if source.endswith("NOTES.txt"):
            continue
        for doc in split_documents(manifests[source]):
            try:
                obj = helm.values_from_yaml(doc)
            except helm.HelmError as e:
                raise Failure(f"{label}: {source} renders invalid YAML: {e}\n{doc}") from None
            if not isinstance(obj, dict) or not obj.get("kind") or not obj.get("apiVersion"):
                raise Failure(f"{label}: {source} renders a document without kind/apiVersion:\n{doc}")
            out.append((kind_rank(obj["kind"]), len(out), source, doc))

    out.sort(key=lambda t: (t[0], t[1]))
    return "".join(f"---\n# Source: {source}\n{doc}\n" for _, _, source, doc in out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="template.py",
        description="Render a Helm chart like `helm template`, with Helm's Go engine "
                    "(PyPI helm-python-sdk); no helm binary needed.",
    )
    p.add_argument("chart", help="the chart directory, e.g. deploy/helm/weft")
    p.add_argument("-f", "--values", action="append", default=[], metavar="FILE",
                   help="a values file (repeatable; later ones win; - is stdin)")
    p.add_argument("--set", action="append", default=[], metavar="K=V",
                   help="a value, as helm --set (repeatable)")
    p.add_argument("--set-string", action="append", default=[], metavar="K=V",
                   help="a string value, as helm --set-string (repeatable)")
    p.add_argument("--set-json", action="append", default=[], metavar="K=JSON",
                   help="a JSON value, as helm --set-json (repeatable)")
    p.add_argument("--name", default="weft", help="the release name (default: weft)")
    p.add_argument("-n", "--namespace", default="weft-system",
                   help="the release namespace (default: weft-system)")
    p.add_argument("--include-crds", action="store_true",
                   help="also print the chart's crds/ (first, as helm template --include-crds)")
    args = p.parse_args(argv)
    try:
        text = render(args)
    except Failure as e:
        print(f"template.py: {e}", file=sys.stderr)
        return 1
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # `template.py ... | head`: the reader has what it wanted.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
