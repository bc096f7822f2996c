"""Write Weft task plugins in Python.

A task plugin turns a workflow task into a Kubernetes resource and says what
the resource's state means (Flyte's ``BuildResource`` / ``GetTaskPhase``).
The host runs it as a sandboxed WebAssembly component of the
``k8s-task-plugin`` world of ``weft:plugin@0.1.0``; componentize-py builds
that component from your module and this one.

This package hides the generated bindings behind plain Python values
(Kubernetes objects are ``dict``s):

.. code-block:: python

    import weft_plugin as weft
    from weft_plugin import PhaseInfo, PluginError, TaskContext, log

    class Hello(weft.TaskPlugin):
        def build_resource(self, ctx: TaskContext) -> dict:
            image = ctx.require("image", str)        # missing -> permanent error
            log.info(f"building {ctx.resource_name}")
            return {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": ctx.metadata(),          # name, namespace, labels
                "spec": {"restartPolicy": "Never",
                         "containers": [{"name": "main", "image": image}]},
            }

        def get_task_phase(self, ctx: TaskContext, observed: dict) -> PhaseInfo:
            phase = weft.dig(observed, "status", "phase")   # never raises
            if phase == "Succeeded":
                return PhaseInfo.success()
            if phase == "Failed":
                return PhaseInfo.retryable("Failed", "the pod failed")
            return PhaseInfo.running() if phase == "Running" else PhaseInfo.queued()

    # componentize-py looks for a class named after the exported interface.
    K8sTask = weft.export(Hello)

A *web-API* task plugin (the ``webapi-task-plugin`` world of
``weft:plugin@0.2.0``) runs a task as a job of a remote service instead:
subclass :class:`WebApiPlugin` (``create`` / ``get`` / ``delete``), talk to
the service with :mod:`weft_plugin.http`, and bind
``WebapiTask = weft.export_webapi(MyJob)``; its manifest says
``world: webapi-task-plugin``.

The host's imports are plain functions: :mod:`weft_plugin.log`,
:mod:`weft_plugin.clock` and :mod:`weft_plugin.state` (a small key/value
store per plugin: instances are fresh for every call, so it is the only
memory that outlives one).

Natively (plain ``python``/``pytest``, no component) the same code runs with
stand-ins: log lines go to stderr, the clocks are the system's and state is
an in-memory dict, so a plugin's logic can be unit-tested without building.
"""

from __future__ import annotations

import json
import traceback
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _host, _warm, clock, log, state
from ._host import in_component

__all__ = [
    "AbortBehaviour",
    "LogLink",
    "POD_SPECS_ANNOTATION",
    "Phase",
    "PhaseInfo",
    "PluginError",
    "TaskContext",
    "TaskPlugin",
    "TaskProperties",
    "WebApiPlugin",
    "clock",
    "dig",
    "export",
    "export_webapi",
    "http",
    "in_component",
    "log",
    "mark_pod_specs",
    "state",
]

__version__ = "0.1.0"

_REQUIRED = object()


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


class PluginError(Exception):
    """An error a plugin returns on purpose (the WIT ``plugin-error``).

    Raise it from ``build_resource`` or ``get_task_phase``: the host gets the
    ``err`` of the call's result. Any *other* exception is a bug: it is logged
    through the host at error level and the instance traps.
    """

    def __init__(self, message: str, retryable: bool = False):
        super().__init__(message)
        self.message = message
        self.retryable = retryable

    @classmethod
    def permanent(cls, message: str) -> "PluginError":
        """An error no retry fixes (a bad config)."""
        return cls(message, retryable=False)

    @classmethod
    def retryable(cls, message: str) -> "PluginError":  # type: ignore[override]
        """An error a new attempt may not have (an API that did not answer).

        (On an instance, ``e.retryable`` is the bool: the instance attribute
        shadows this class method.)"""
        return cls(message, retryable=True)

    def __repr__(self) -> str:
        return f"PluginError({self.message!r}, retryable={self.retryable})"


# --------------------------------------------------------------------------
# Phases
# --------------------------------------------------------------------------


class Phase(str, Enum):
    """Where a task stands: flytepropeller's plugin phases."""

    NOT_READY = "not-ready"
    QUEUED = "queued"
    WAITING_FOR_RESOURCES = "waiting-for-resources"
    INITIALIZING = "initializing"
    RUNNING = "running"
    SUCCESS = "success"
    RETRYABLE_FAILURE = "retryable-failure"
    PERMANENT_FAILURE = "permanent-failure"

    def is_terminal(self) -> bool:
        """Whether the task is over (succeeded or failed)."""
        return self in (Phase.SUCCESS, Phase.RETRYABLE_FAILURE, Phase.PERMANENT_FAILURE)


@dataclass
class LogLink:
    """A link to logs or a UI for the task (Flyte's TaskLog)."""

    name: str
    uri: str


@dataclass
class PhaseInfo:
    """The answer to "where does this task stand?", built with the class
    methods below and refined with the ``with_*`` methods (which return
    ``self``, so they chain)::

        PhaseInfo.retryable("OOMKilled", "exit 137").with_log_link("Logs", uri)
    """

    phase: Phase
    reason: Optional[str] = None
    message: Optional[str] = None
    outputs: Optional[Dict[str, Any]] = None
    log_links: List[LogLink] = field(default_factory=list)

    # -- constructors -------------------------------------------------------

    @classmethod
    def not_ready(cls, message: str) -> "PhaseInfo":
        """The task cannot start yet, and why."""
        return cls(Phase.NOT_READY, message=message)

    @classmethod
    def queued(cls, message: Optional[str] = None) -> "PhaseInfo":
        """Accepted, waiting to be scheduled."""
        return cls(Phase.QUEUED, message=message)

    @classmethod
    def waiting_for_resources(cls, message: str) -> "PhaseInfo":
        """Waiting for capacity (quota, nodes), and why."""
        return cls(Phase.WAITING_FOR_RESOURCES, message=message)

    @classmethod
    def initializing(cls, message: Optional[str] = None) -> "PhaseInfo":
        """Scheduled and starting."""
        return cls(Phase.INITIALIZING, message=message)

    @classmethod
    def running(cls, message: Optional[str] = None) -> "PhaseInfo":
        """Running."""
        return cls(Phase.RUNNING, message=message)

    @classmethod
    def success(cls, outputs: Optional[Dict[str, Any]] = None) -> "PhaseInfo":
        """Succeeded, with outputs (a dict: a JSON object) or none."""
        if outputs is not None and not isinstance(outputs, dict):
            raise TypeError(f"outputs must be a dict (a JSON object), not {type(outputs).__name__}")
        return cls(Phase.SUCCESS, outputs=outputs)

    @classmethod
    def retryable(cls, reason: str, message: str) -> "PhaseInfo":
        """A failure of the task that a new attempt may fix."""
        return cls(Phase.RETRYABLE_FAILURE, reason=reason, message=message)

    @classmethod
    def permanent(cls, reason: str, message: str) -> "PhaseInfo":
        """A failure no retry will fix (bad image, invalid spec)."""
        return cls(Phase.PERMANENT_FAILURE, reason=reason, message=message)

    @classmethod
    def system(cls, reason: str, message: str) -> "PhaseInfo":
        """A failure of the platform (eviction, preemption, node loss):
        retryable, counted on the system retry budget (the reason gets the
        ``System:`` prefix the host looks for)."""
        return cls(Phase.RETRYABLE_FAILURE, reason=f"System:{reason}", message=message)

    # -- refinements --------------------------------------------------------

    def with_reason(self, reason: Optional[str]) -> "PhaseInfo":
        """Sets the reason."""
        self.reason = reason
        return self

    def with_message(self, message: Optional[str]) -> "PhaseInfo":
        """Sets the message."""
        self.message = message
        return self

    def with_log_link(self, name: str, uri: Optional[str]) -> "PhaseInfo":
        """Adds a log link; a missing or empty ``uri`` is skipped, so
        ``with_log_link("Dashboard", dig(obj, "status", "url"))`` is safe."""
        if isinstance(uri, str) and uri:
            self.log_links.append(LogLink(name, uri))
        return self

    def is_system_failure(self) -> bool:
        """Whether the reason marks a platform failure (``System:``)."""
        return bool(self.reason) and self.reason.startswith("System:")


# --------------------------------------------------------------------------
# The task context
# --------------------------------------------------------------------------


_KIND_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "a boolean",
               dict: "an object", list: "a list"}


def _kind_name(kind: Any) -> str:
    if isinstance(kind, tuple):
        return " or ".join(_kind_name(k) for k in kind)
    return _KIND_NAMES.get(kind, getattr(kind, "__name__", str(kind)))


def _check_kind(value: Any, kind: Any) -> bool:
    if kind is None:
        return True
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # bool is an int in Python; a JSON true is not a number of workers.
    if isinstance(value, bool) and bool not in kinds:
        return False
    if float in kinds and isinstance(value, int) and not isinstance(value, bool):
        return True
    return isinstance(value, kinds)


@dataclass
class TaskContext:
    """Everything the host tells a task plugin about a task.

    ``config``, ``inputs`` and ``plugin_config`` arrive as JSON text; the SDK
    parses them into dicts before the plugin sees them, and ``labels`` into a
    dict. Every field has a default so tests can build one with only the
    fields they need: ``TaskContext(config={"image": "alpine"})``.
    """

    workflow: str = "example"
    namespace: str = "default"
    node_id: str = "task"
    attempt: int = 0
    task_type: str = ""
    config: Dict[str, Any] = field(default_factory=dict)
    inputs: Dict[str, Any] = field(default_factory=dict)
    resource_name: str = "example-task-0"
    labels: Dict[str, str] = field(default_factory=dict)
    plugin_config: Dict[str, Any] = field(default_factory=dict)

    def require(self, key: str, kind: Any = None) -> Any:
        """The task config's ``key``; a permanent :class:`PluginError` naming
        it when it is missing or (with ``kind``, a type or tuple of types) of
        the wrong type. A bad config is the user's mistake: no retry fixes it."""
        return self._field(self.config, "config", key, kind, _REQUIRED)

    def option(self, key: str, default: Any = None, kind: Any = None) -> Any:
        """The task config's ``key``, or ``default`` when missing or null; a
        permanent error when present with the wrong type."""
        return self._field(self.config, "config", key, kind, default)

    def plugin_option(self, key: str, default: Any = None, kind: Any = None) -> Any:
        """The plugin config's ``key`` (the manifest's ``config`` merged with
        the operator's overrides), or ``default``."""
        return self._field(self.plugin_config, "plugin config", key, kind, default)

    def metadata(self, **extra: Any) -> Dict[str, Any]:
        """``{"name": resource_name, "namespace": namespace, "labels": labels}``
        (plus ``extra`` keys): use the host's name, so a re-run after a crash
        finds the same resource instead of creating another."""
        meta: Dict[str, Any] = {
            "name": self.resource_name,
            "namespace": self.namespace,
            "labels": dict(self.labels),
        }
        meta.update(extra)
        return meta

    @staticmethod
    def _field(obj: Dict[str, Any], what: str, key: str, kind: Any, default: Any) -> Any:
        value = obj.get(key) if isinstance(obj, dict) else None
        if value is None:
            if default is _REQUIRED:
                raise PluginError.permanent(f"invalid task {what}: missing field `{key}`")
            return default
        if not _check_kind(value, kind):
            raise PluginError.permanent(
                f"invalid task {what}: `{key}` must be {_kind_name(kind)}, "
                f"not {json.dumps(value)[:80]}"
            )
        return value


# --------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------


class AbortBehaviour(str, Enum):
    """What the host does with a task's resource when its workflow is aborted."""

    DELETE = "delete"
    LEAVE = "leave"


@dataclass
class TaskProperties:
    """Static facts about a task plugin, asked once per load."""

    abort: AbortBehaviour = AbortBehaviour.DELETE
    delete_on_finish: bool = False


# --------------------------------------------------------------------------
# Safe access to observed objects
# --------------------------------------------------------------------------


def dig(obj: Any, *path: Any, default: Any = None) -> Any:
    """``obj[p0][p1]...`` or ``default`` when any step is missing or of the
    wrong shape (a str key on a list, an index past the end, a null).

    ``get_task_phase`` must answer for *any* object, including partial and
    garbage ones, so read observed objects with this rather than ``[]``::

        dig(observed, "status", "conditions", 0, "type")
    """
    cur = obj
    for p in path:
        if isinstance(p, str):
            if not isinstance(cur, dict) or p not in cur:
                return default
            cur = cur[p]
        elif isinstance(p, int) and not isinstance(p, bool):
            if not isinstance(cur, list) or not -len(cur) <= p < len(cur):
                return default
            cur = cur[p]
        else:
            return default
    return default if cur is None else cur


# --------------------------------------------------------------------------
# Artifacts in a resource's pods
# --------------------------------------------------------------------------

#: The annotation listing an object's pod specs for the host to wrap with the
#: task's artifacts: a JSON array of JSON Pointers (RFC 6901).
POD_SPECS_ANNOTATION = "weft.dev/pod-specs"


def _pointer(obj: Any, pointer: str) -> Any:
    if not pointer.startswith("/"):
        return None
    cur = obj
    for raw in pointer[1:].split("/"):
        step: Any = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(cur, list) and step.isdigit():
            step = int(step)
        cur = dig(cur, step)
        if cur is None:
            return None
    return cur


def mark_pod_specs(obj: Dict[str, Any], pointers: List[str]) -> Dict[str, Any]:
    """Marks the pod specs of ``obj`` (a Job's ``/spec/template/spec``, a
    PyTorchJob's replicas) so that the host moves the task's artifacts in
    their pods as in a Pod task: an init container fetches the inputs and the
    main container's ``command`` runs under ``weft io exec``, which uploads
    the outputs. The first pod spec reports the outputs; the others get the
    inputs. Each must be an object with containers, else a permanent
    :class:`PluginError` names the pointer. Returns ``obj``."""
    if not pointers:
        raise PluginError.permanent(
            "mark_pod_specs: no pod spec given (pass at least one JSON Pointer)"
        )
    for p in pointers:
        spec = _pointer(obj, p) if isinstance(p, str) else None
        if spec is None:
            raise PluginError.permanent(f"{p}: nothing there (a JSON Pointer starts with /)")
        if not dig(spec, "containers"):
            raise PluginError.permanent(f"{p}: not a pod spec (no containers)")
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta.get("annotations"), dict):
        meta["annotations"] = {}
    meta["annotations"][POD_SPECS_ANNOTATION] = json.dumps(list(pointers), separators=(",", ":"))
    return obj


# --------------------------------------------------------------------------
# The plugin
# --------------------------------------------------------------------------


class TaskPlugin:
    """A task plugin: Flyte's ``k8s.Plugin``. Subclass it, implement
    :meth:`build_resource` and :meth:`get_task_phase`, and export it with
    ``K8sTask = weft_plugin.export(MyPlugin)`` in the module you build."""

    def properties(self) -> TaskProperties:
        """Static properties, asked once per load. The default deletes the
        resource on abort and keeps it once the task finished."""
        return TaskProperties()

    def build_resource(self, ctx: TaskContext) -> Dict[str, Any]:
        """The Kubernetes object that runs this task (a dict with
        ``apiVersion``, ``kind``, ``metadata``, ``spec``). The host forces the
        namespace, adds the owner reference and labels, and refuses kinds the
        manifest does not declare. Raise :class:`PluginError` to refuse."""
        raise NotImplementedError

    def get_task_phase(self, ctx: TaskContext, observed: Dict[str, Any]) -> PhaseInfo:
        """Where the task stands, given the object as last observed in the
        cluster. Must answer a phase for any object, even a partial one."""
        raise NotImplementedError


def _context(wit_ctx: Any) -> TaskContext:
    def parse(what: str, text: str) -> Dict[str, Any]:
        try:
            value = json.loads(text) if text else {}
        except ValueError as e:
            raise PluginError.permanent(f"the host sent {what} that is not JSON: {e}")
        return value if isinstance(value, dict) else {}

    return TaskContext(
        workflow=wit_ctx.workflow,
        namespace=wit_ctx.namespace,
        node_id=wit_ctx.node_id,
        attempt=wit_ctx.attempt,
        task_type=wit_ctx.task_type,
        config=parse("a config", wit_ctx.config),
        inputs=parse("inputs", wit_ctx.inputs),
        resource_name=wit_ctx.resource_name,
        labels=dict(wit_ctx.labels),
        plugin_config=parse("a plugin config", wit_ctx.plugin_config),
    )


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _wit_phase_info(call: str, info: Any) -> Any:
    """A :class:`PhaseInfo` as the WIT record."""
    wit = _host.wit_types
    if not isinstance(info, PhaseInfo):
        raise TypeError(f"{call} must return a PhaseInfo, not {type(info).__name__}")
    outputs = info.outputs
    if outputs is not None and not isinstance(outputs, dict):
        raise TypeError("PhaseInfo.outputs must be a dict (a JSON object)")
    return wit.PhaseInfo(
        phase=getattr(wit.Phase, Phase(info.phase).name),
        reason=info.reason,
        message=info.message,
        outputs=None if outputs is None else _dumps(outputs),
        log_links=[wit.LogLink(name=l.name, uri=l.uri) for l in info.log_links],
    )


def _guarded(call: str, fn: Callable[[], Any]) -> Any:
    """Runs ``fn``: a PluginError becomes the WIT error; anything else is a
    bug, logged through the host at error level (the host's trap error
    quotes that line) and re-raised, so the instance traps like a Rust panic."""
    try:
        return fn()
    except PluginError as e:
        raise _host.wit_result.Err(_host.wit_types.PluginError(message=e.message, retryable=e.retryable))
    except Exception:
        log.error(f"{call}: unhandled exception (a bug in the plugin):\n{traceback.format_exc()}")
        raise


def export(plugin: Any, warm_up: Any = True) -> type:
    """The class componentize-py exports for the ``k8s-task`` interface.

    ``plugin`` is a :class:`TaskPlugin` subclass (or instance). Bind the
    result to the name ``K8sTask`` at the top level of the module you build,
    below everything the plugin uses::

        K8sTask = weft_plugin.export(MyPlugin)

    Inside the component (that is, at build time) it then warms the plugin
    up: it calls ``properties``, ``build_resource`` and ``get_task_phase`` a
    few times on a sample task, so that CPython's first-run work on those
    code paths is in the snapshot every instance starts from rather than
    in every call (see ``weft_plugin/_warm.py``). The sample is
    ``warm_up`` when it is a dict (a task as in ``task.json``), else the
    ``task.json`` next to the plugin's module, else an empty task. While it
    runs, log lines are dropped, the clocks read 0 and state is empty, and
    whatever the plugin raises is ignored. What the calls leave in module
    globals is in every instance; pass ``warm_up=False`` for a plugin that
    must start each call from its globals as imported.
    """
    impl = plugin() if isinstance(plugin, type) else plugin
    # Inside the component, the generated protocol; natively, nothing to export.
    base: type = object
    if in_component():
        if _host.wit_task is None:
            raise TypeError("weft_plugin.export: this component is not of the k8s-task-plugin world "
                            "(a webapi-task-plugin exports with weft_plugin.export_webapi)")
        base = _host.wit_exports.K8sTask

    class K8sTask(base):  # type: ignore[misc, valid-type]
        def properties(self):  # noqa: D401 - WIT glue
            wit_task = _host.wit_task
            p = impl.properties()
            abort = AbortBehaviour(p.abort)
            return wit_task.TaskProperties(
                abort=wit_task.AbortBehaviour.LEAVE
                if abort is AbortBehaviour.LEAVE
                else wit_task.AbortBehaviour.DELETE,
                delete_on_finish=bool(p.delete_on_finish),
            )

        def build_resource(self, ctx):
            def run() -> str:
                obj = impl.build_resource(_context(ctx))
                if isinstance(obj, str):  # already serialized
                    return obj
                if not isinstance(obj, dict):
                    raise TypeError(f"build_resource must return a dict, not {type(obj).__name__}")
                return _dumps(obj)

            return _guarded("build-resource", run)

        def get_task_phase(self, ctx, observed):
            def run():
                try:
                    obj = json.loads(observed)
                except ValueError as e:
                    raise PluginError.permanent(f"the observed resource is not JSON: {e}")
                info = impl.get_task_phase(_context(ctx), obj if isinstance(obj, dict) else {})
                return _wit_phase_info("get_task_phase", info)

            return _guarded("get-task-phase", run)

    K8sTask.__qualname__ = K8sTask.__name__ = "K8sTask"
    K8sTask.plugin = impl  # for tests: weft_plugin.export(P).plugin
    if warm_up is not False and in_component():
        _warm.warm_up(K8sTask, impl, warm_up if isinstance(warm_up, dict) else None)
    return K8sTask


# --------------------------------------------------------------------------
# Web-API task plugins (webapi-task-plugin, weft:plugin@0.2.0)
# --------------------------------------------------------------------------


class WebApiPlugin:
    """A web-API task plugin: Flyte's async agent. The task runs as a job
    of a service the plugin calls over HTTP (:mod:`weft_plugin.http`).
    Subclass it, implement :meth:`create`, :meth:`get` and :meth:`delete`,
    and export it with ``WebapiTask = weft_plugin.export_webapi(MyPlugin)``
    in the module you build; its manifest says ``world:
    webapi-task-plugin``.

    Every call gets a fresh instance: what ``get`` and ``delete`` need must
    be in the *meta* ``create`` returns (or in :mod:`weft_plugin.state`).
    """

    def create(self, ctx: TaskContext, idempotency_key: str) -> str:
        """Starts the job and returns its *meta*: what identifies it (a job
        id, a URL, a small JSON text), opaque to the host, which keeps it in
        the node's status (at most 4 KiB) and hands it to :meth:`get` and
        :meth:`delete`. ``idempotency_key`` is the same for every create of
        this attempt, across controller restarts: give it to the service
        (as the job's id, an ``Idempotency-Key`` header) so that a create
        repeated after a crash finds the job instead of starting another.
        Raise :class:`PluginError` to refuse (a bad config: permanent; a
        service that did not answer: retryable)."""
        raise NotImplementedError

    def get(self, ctx: TaskContext, meta: str) -> PhaseInfo:
        """Where the job stands: a phase, outputs on success, log links to
        the service's UI. A :class:`PluginError` is about *asking* (the host
        polls again when it is retryable); a failed job is a failure phase."""
        raise NotImplementedError

    def delete(self, ctx: TaskContext, meta: str) -> None:
        """Stops the job (workflow aborted, node timed out). Stopping one that
        already ended, or that the service no longer knows, is not an error."""
        raise NotImplementedError


def export_webapi(plugin: Any, warm_up: Any = True) -> type:
    """The class componentize-py exports for the ``webapi-task`` interface.

    ``plugin`` is a :class:`WebApiPlugin` subclass (or instance). Bind the
    result to the name ``WebapiTask`` at the top level of the module you
    build, below everything the plugin uses::

        WebapiTask = weft_plugin.export_webapi(MyJob)

    At build time it warms the plugin up as :func:`export` does, calling
    ``create``, ``get`` and ``delete`` on the sample task; no request
    leaves the build: :func:`weft_plugin.http.request` answers each with
    ``200`` and the body ``{}`` while the warm-up runs.
    """
    impl = plugin() if isinstance(plugin, type) else plugin
    base: type = object
    if in_component():
        if _host.wit_webapi is None:
            raise TypeError("weft_plugin.export_webapi: this component is not of the "
                            "webapi-task-plugin world (set `world: webapi-task-plugin` in weft-plugin.yaml)")
        base = _host.wit_exports.WebapiTask

    class WebapiTask(base):  # type: ignore[misc, valid-type]
        def create(self, ctx, idempotency_key):
            def run() -> str:
                meta = impl.create(_context(ctx), idempotency_key)
                if not isinstance(meta, str):
                    raise TypeError(f"create must return the meta as a str, not {type(meta).__name__}")
                return meta

            return _guarded("create", run)

        def get(self, ctx, meta):
            return _guarded("get", lambda: _wit_phase_info("get", impl.get(_context(ctx), meta)))

        def delete(self, ctx, meta):
            def run() -> None:
                impl.delete(_context(ctx), meta)

            return _guarded("delete", run)

    WebapiTask.__qualname__ = WebapiTask.__name__ = "WebapiTask"
    WebapiTask.plugin = impl  # for tests: weft_plugin.export_webapi(P).plugin
    if warm_up is not False and in_component():
        _warm.warm_up_webapi(WebapiTask, impl, warm_up if isinstance(warm_up, dict) else None)
    return WebapiTask


# Last: weft_plugin.http needs PluginError from above.
from . import http  # noqa: E402
