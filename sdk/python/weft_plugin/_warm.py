"""The build-time warm-up: calls the exported plugin a few times while
componentize-py pre-initialises the component, so that the work of a first
call lands in the snapshot every instance starts from.

The host serves each call with a fresh instance of that snapshot. Without
the warm-up, the first call of every instance pays what CPython does the
first time it runs a code path: the specialising interpreter rewriting each
function's bytecode, the json module building its encoder and scanner,
``re`` compiling a pattern into its cache, lazily created module state.
With it, those are done once, at build time, and the same for every
instance.

The calls use a synthetic task (or the plugin's ``task.json``, a sample task
that is part of its sources), never data of a real call; the host's imports
do not exist at build time, so log lines are dropped, the clocks read 0 and
state is empty while it runs (:data:`weft_plugin._host.warming`). Whatever
the plugin does is swallowed: an exception only ends that round early.
Because the component is built from its sources alone, the warm-up is the
same on every build (reproducible builds stay byte-identical).
"""

from __future__ import annotations

import gc
import json
import os
import sys
from typing import Any, Optional

from . import _host

# Enough rounds for CPython to specialise the code paths of a call (an
# adaptive instruction specialises after its second run).
ROUNDS = 4

_OBSERVED = {
    "apiVersion": "v1",
    "kind": "Warmup",
    "metadata": {"name": "warm-up-task-0", "namespace": "default", "labels": {}},
    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
}


def _sample_task(impl: Any) -> dict:
    """The plugin's ``task.json`` (next to the module that defines its
    class), else {}: read at build time from the plugin's own sources."""
    module = sys.modules.get(type(impl).__module__)
    path = getattr(module, "__file__", None)
    if not path:
        return {}
    try:
        with open(os.path.join(os.path.dirname(path), "task.json"), encoding="utf-8") as f:
            task = json.load(f)
    except (OSError, ValueError):
        return {}
    return task if isinstance(task, dict) else {}


def _text(value: Any, default: str) -> str:
    return value if isinstance(value, str) and value else default


def _context(task: dict) -> Any:
    def obj(key: str) -> str:
        value = task.get(key)
        return json.dumps(value if isinstance(value, dict) else {})

    return _host.wit_types.TaskContext(
        workflow=_text(task.get("workflow"), "warm-up"),
        namespace=_text(task.get("namespace"), "default"),
        node_id=_text(task.get("nodeId"), "task"),
        attempt=0,
        task_type=_text(task.get("taskType"), ""),
        config=obj("config"),
        inputs=obj("inputs"),
        resource_name="warm-up-task-0",
        labels=[("weft.dev/workflow", "warm-up"), ("weft.dev/node", "task")],
        plugin_config="{}",
    )


def warm_up(export_class: type, impl: Any, task: Optional[dict] = None) -> None:
    """Runs ``properties``, ``build-resource`` and ``get-task-phase`` of the
    export ``ROUNDS`` times, with the host's imports stood in for."""
    ctx = _context(_sample_task(impl) if task is None else task)
    observed = json.dumps(_OBSERVED)
    export = export_class()
    _host.warming = True
    try:
        for _ in range(ROUNDS):
            for call in (
                export.properties,
                lambda: export.build_resource(ctx),
                lambda: export.get_task_phase(ctx, observed),
            ):
                try:
                    call()
                except BaseException:  # noqa: BLE001 - a warm-up call may fail
                    pass
    finally:
        _host.warming = False
        # Drop what the rounds left (cycles included), then move everything
        # the snapshot holds to the permanent generation: an instance lives
        # for one call, so no collection during a call needs to visit (and
        # write to, page by page) the imported modules' objects.
        gc.collect()
        gc.freeze()


def warm_up_webapi(export_class: type, impl: Any, task: Optional[dict] = None) -> None:
    """Runs ``create``, ``get`` and ``delete`` of a web-API export
    ``ROUNDS`` times, with the host's imports stood in for: no request
    leaves the build (weft_plugin.http answers each with 200 and ``{}``)."""
    ctx = _context(_sample_task(impl) if task is None else task)
    export = export_class()
    _host.warming = True
    try:
        for _ in range(ROUNDS):
            meta = "warm-up-task-0"
            try:
                meta = export.create(ctx, "warm-up-task-0")
            except BaseException:  # noqa: BLE001 - a warm-up call may fail
                pass
            for call in (lambda: export.get(ctx, meta), lambda: export.delete(ctx, meta)):
                try:
                    call()
                except BaseException:  # noqa: BLE001
                    pass
    finally:
        _host.warming = False
        gc.collect()
        gc.freeze()
