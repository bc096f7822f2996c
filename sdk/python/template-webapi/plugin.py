"""my-task: runs a Weft task as a job of a small HTTP jobs API.

The service (any that speaks this, e.g. a team's own batch API)::

    POST   {url}/jobs        {"id", "command", "params", "inputs"} -> 201 {"id", "state"}
                             (409 when a job with that id exists already)
    GET    {url}/jobs/{id}   -> {"state": PENDING|RUNNING|SUCCEEDED|FAILED|STOPPED,
                                 "message"?, "result"?}
    DELETE {url}/jobs/{id}   -> 2xx (404 when it is gone)

Task config::

    command: train            # required: what the service runs
    params: {lr: 0.1}         # optional, passed as they are
    url: http://127.0.0.1:8080  # optional: the service (default: the plugin config's `url`)

The job's id is the host's idempotency key (the attempt's resource name),
also sent as the ``Idempotency-Key`` header: a create repeated after a
controller crash finds the job it made (409) and adopts it. The meta the
host keeps is the job's URL. Outputs of a successful job: its ``result``.
"""

from urllib.parse import quote

import weft_plugin as weft
from weft_plugin import PhaseInfo, PluginError, TaskContext, http, log


def service(ctx: TaskContext) -> str:
    """The jobs API's base URL: the task's `url`, else the plugin config's."""
    url = ctx.option("url", None, str) or ctx.plugin_option("url", None, str)
    if not url:
        raise PluginError.permanent("no service URL: set `url` in the task config or the plugin config")
    return url.rstrip("/")


class HttpJob(weft.WebApiPlugin):
    def create(self, ctx: TaskContext, idempotency_key: str) -> str:
        command = ctx.require("command", str)
        params = ctx.option("params", {}, dict)
        job_url = f"{service(ctx)}/jobs/{quote(idempotency_key, safe='')}"
        resp = http.post(
            f"{service(ctx)}/jobs",
            json={"id": idempotency_key, "command": command, "params": params, "inputs": ctx.inputs},
            headers={"Idempotency-Key": idempotency_key},
        )
        if resp.status == 409:
            log.info(f"job {idempotency_key} exists already: adopting it")
            return job_url
        resp.raise_for_status()  # 4xx permanent, 5xx retryable
        log.info(f"created job {idempotency_key}")
        return job_url

    def get(self, ctx: TaskContext, meta: str) -> PhaseInfo:
        resp = http.get(meta)
        if resp.status == 404:
            return PhaseInfo.retryable("JobNotFound", f"the service no longer knows {meta}")
        job = resp.raise_for_status().json()
        job = job if isinstance(job, dict) else {}
        state = job.get("state")
        message = job.get("message") if isinstance(job.get("message"), str) else None
        if state == "SUCCEEDED":
            result = job.get("result")
            info = PhaseInfo.success(result if isinstance(result, dict) else {})
        elif state == "FAILED":
            info = PhaseInfo.retryable("JobFailed", message or "the job failed")
        elif state == "STOPPED":
            info = PhaseInfo.permanent("JobStopped", message or "the job was stopped")
        elif state == "RUNNING":
            info = PhaseInfo.running(message)
        else:  # PENDING, or a state this plugin does not know
            info = PhaseInfo.queued(message)
        return info.with_log_link("Job", meta)

    def delete(self, ctx: TaskContext, meta: str) -> None:
        resp = http.delete(meta)
        if resp.status != 404:  # gone already: nothing to stop
            resp.raise_for_status()


WebapiTask = weft.export_webapi(HttpJob)
