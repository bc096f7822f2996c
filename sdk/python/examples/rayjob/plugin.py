"""py-rayjob: runs a Weft task as a KubeRay RayJob (ray.io/v1).

Task config::

    entrypoint: python train.py --epochs 3   # required: the job's command
    image: rayproject/ray:2.41.0             # required: head and worker image
    workers: 2                               # worker replicas (default 1, may be 0)
    runtimeEnv: {pip: [torch]}               # optional Ray runtime_env
    headResources / workerResources: {...}   # optional container resources

Inputs reach the job as environment variables: each input ``name`` becomes
``WEFT_INPUT_<NAME>`` (upper-cased, other characters than A-Z0-9 become
``_``) in the runtime_env's ``env_vars``, so the driver (the entrypoint) and
every Ray task and actor see them. Strings are passed as they are, other
values as JSON. An ``env_vars`` entry of the task's own ``runtimeEnv`` wins.

Outputs of a successful task: ``{"jobId": <the Ray job id>}``.
"""

import json
import re

import weft_plugin as weft
from weft_plugin import PhaseInfo, PluginError, TaskContext, dig, log


def input_env(inputs: dict) -> dict:
    """``WEFT_INPUT_<NAME>`` variables for the task's inputs."""
    env = {}
    for name, value in sorted(inputs.items()):
        key = "WEFT_INPUT_" + re.sub(r"[^A-Z0-9]", "_", str(name).upper())
        env[key] = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return env


def _text(value):
    """A status field as a string, or None when absent or of another type."""
    return value if isinstance(value, str) and value else None


def _dashboard(url):
    if not url:
        return None
    return url if "://" in url else "http://" + url


class RayJob(weft.TaskPlugin):
    def build_resource(self, ctx: TaskContext) -> dict:
        entrypoint = ctx.require("entrypoint", str)
        image = ctx.require("image", str)
        workers = ctx.option("workers", 1, int)
        if workers < 0:
            raise PluginError.permanent(f"invalid task config: `workers` must be at least 0, not {workers}")
        runtime_env = dict(ctx.option("runtimeEnv", {}, dict))
        env_vars = input_env(ctx.inputs)
        own = runtime_env.get("env_vars")
        if own is not None and not isinstance(own, dict):
            raise PluginError.permanent("invalid task config: `runtimeEnv.env_vars` must be an object")
        env_vars.update(own or {})
        if env_vars:
            runtime_env["env_vars"] = env_vars

        head = {"name": "ray-head", "image": image,
                "ports": [{"containerPort": 6379, "name": "gcs-server"},
                          {"containerPort": 8265, "name": "dashboard"},
                          {"containerPort": 10001, "name": "client"}]}
        worker = {"name": "ray-worker", "image": image}
        for container, key in ((head, "headResources"), (worker, "workerResources")):
            resources = ctx.option(key, None, dict)
            if resources:
                container["resources"] = resources

        spec = {
            "entrypoint": entrypoint,
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": {
                "headGroupSpec": {
                    "rayStartParams": {"dashboard-host": "0.0.0.0"},
                    "template": {"metadata": {"labels": dict(ctx.labels)},
                                 "spec": {"containers": [head]}},
                },
                "workerGroupSpecs": [{
                    "groupName": "workers",
                    "replicas": workers,
                    "minReplicas": workers,
                    "maxReplicas": workers,
                    "rayStartParams": {},
                    "template": {"metadata": {"labels": dict(ctx.labels)},
                                 "spec": {"containers": [worker]}},
                }],
            },
        }
        if runtime_env:
            # runtimeEnvYAML is YAML text; JSON is YAML.
            spec["runtimeEnvYAML"] = json.dumps(runtime_env, sort_keys=True)
        ray_version = ctx.plugin_option("rayVersion", None, str)
        if ray_version:
            spec["rayClusterSpec"]["rayVersion"] = ray_version
        ttl = ctx.plugin_option("ttlSecondsAfterFinished", None, int)
        if ttl is not None:
            spec["ttlSecondsAfterFinished"] = ttl

        log.debug(f"RayJob {ctx.resource_name}: {workers} worker(s), image {image}")
        return {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": ctx.metadata(),
            "spec": spec,
        }

    def get_task_phase(self, ctx: TaskContext, observed: dict) -> PhaseInfo:
        deployment = _text(dig(observed, "status", "jobDeploymentStatus"))
        job = _text(dig(observed, "status", "jobStatus"))
        reason = _text(dig(observed, "status", "reason"))
        message = _text(dig(observed, "status", "message"))
        dashboard = _dashboard(_text(dig(observed, "status", "dashboardURL")))
        job_id = _text(dig(observed, "status", "jobId")) or _text(dig(observed, "spec", "jobId"))

        if job == "SUCCEEDED":
            info = PhaseInfo.success({"jobId": job_id} if job_id else {})
        elif job == "FAILED":
            info = PhaseInfo.retryable(reason or "RayJobFailed", message or "the Ray job failed")
        elif job == "STOPPED":
            info = PhaseInfo.permanent(reason or "RayJobStopped", message or "the Ray job was stopped")
        elif deployment == "Failed":
            # KubeRay's reasons: ValidationFailed (a bad spec), DeadlineExceeded
            # (activeDeadlineSeconds), SubmissionFailed, AppFailed, ...
            why = reason or "RayJobFailed"
            text = message or f"the RayJob failed ({why})"
            if why in ("ValidationFailed", "DeadlineExceeded"):
                info = PhaseInfo.permanent(why, text)
            else:
                info = PhaseInfo.retryable(why, text)
        elif deployment == "Complete":
            # Complete without a terminal job status: KubeRay lost track of the job.
            info = PhaseInfo.retryable(reason or "RayJobIncomplete",
                                       message or f"the RayJob completed with job status {job or 'unknown'}")
        elif deployment in ("Suspended", "Suspending"):
            info = PhaseInfo.waiting_for_resources(message or f"the RayJob is {deployment.lower()}")
        elif deployment == "Retrying":
            info = PhaseInfo.initializing(message or "KubeRay is retrying the RayJob")
        elif deployment == "Initializing" or (deployment == "Running" and job in (None, "PENDING")):
            info = PhaseInfo.initializing(message or "the Ray cluster is starting")
        elif deployment == "Running" or job == "RUNNING":
            info = PhaseInfo.running(message)
        else:  # no status yet, New, Waiting, or a status this plugin does not know
            info = PhaseInfo.queued(message)
        return info.with_log_link("Ray dashboard", dashboard)


K8sTask = weft.export(RayJob)
