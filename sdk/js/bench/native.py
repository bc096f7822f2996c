"""The probe's measurements (measure.js) in QuickJS built natively, the
reference for the component's figures: the same JavaScript, the same task,
no WebAssembly. Needs node (for bundle.mjs) and PyPI's quickjs (Bellard's
QuickJS as a C extension; the component runs quickjs-ng, its fork):

    python3 -m pip install quickjs
    python3 sdk/js/bench/native.py

Prints each figure in µs per call, as the component's ConfigMap has them.
"""

import json
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import quickjs

HERE = pathlib.Path(__file__).resolve().parent
SDK = HERE.parent
TASK = SDK / "examples" / "k8s-job" / "task.json"

# The host's imports, answered natively: log lines dropped, no state.
HOST_IMPORTS = {
    r'^import \{ log as (\S+) \} from "weft:plugin/log@0\.1\.0";': r"const \1 = () => {};",
    r'^import "weft:plugin/clock@0\.1\.0";': "",
    r'^import \* as (\S+) from "weft:plugin/clock@0\.1\.0";': r"const \1 = {nowMillis: () => 0n, monotonicNanos: () => 0n};",
    r'^import \* as (\S+) from "weft:plugin/state@0\.1\.0";': r"const \1 = {get: () => null, set: () => {}, delete: () => {}};",
}


def bundle() -> str:
    """measure.js (with the SDK and js-job) bundled as build.sh bundles a
    plugin, the host's imports replaced and its export made a global."""
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "bundle.js"
        subprocess.run(["node", str(SDK / "bundle.mjs"), str(HERE / "measure.js"), str(out)], check=True)
        text = out.read_text()
    for pattern, replacement in HOST_IMPORTS.items():
        text = re.sub(pattern, replacement, text, flags=re.M)
    text = re.sub(r"^export \{ (\w+) \};", r"globalThis.__measure = \1;", text, flags=re.M)
    if re.search(r"^(import|export) ", text, flags=re.M):
        sys.exit("native.py: the bundle has an import or export this script does not know")
    return text


def compact(value) -> str:
    """JSON as the host serialises it (serde_json: sorted keys, no spaces)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def wit_context() -> dict:
    """task.json as `weft plugin test` passes it (its labels, the probe
    manifest's plugin config, which is js-job's): the same text the
    component's run prints as `context`."""
    task = json.loads(TASK.read_text())
    node = task["nodeId"]
    return {
        "workflow": task["workflow"],
        "namespace": task["namespace"],
        "nodeId": node,
        "attempt": 0,
        "taskType": task["taskType"],
        "config": compact(task["config"]),
        "inputs": compact(task["inputs"]),
        "resourceName": f"{task['workflow']}-{node}-0",
        "labels": [
            ["weft.dev/attempt", "0"],
            ["weft.dev/node", node],
            ["weft.dev/workflow", task["workflow"]],
        ],
        "pluginConfig": compact({"ttlSecondsAfterFinished": 600}),
    }


def main() -> None:
    ctx = quickjs.Context()
    ctx.set_time_limit(-1)
    ctx.add_callable("__nanos", lambda: float(time.perf_counter_ns()))
    ctx.eval(bundle())
    figures = json.loads(ctx.eval(f"JSON.stringify(__measure(__nanos, {json.dumps(wit_context())}))"))
    for label, value in figures.items():
        print(f"{label}: {value}")


if __name__ == "__main__":
    main()
