"""my-task: a Weft task plugin. Rename it in weft-plugin.yaml, then make
build_resource and get_task_phase your own.

Build:  ../build.sh . out          (or <sdk>/python/build.sh <dir> <out>)
Test:   PYTHONPATH=<sdk>/python python3 -m unittest
"""

import weft_plugin as weft
from weft_plugin import PhaseInfo, TaskContext, dig, log


class MyTask(weft.TaskPlugin):
    def build_resource(self, ctx: TaskContext) -> dict:
        # A missing or mistyped field is a permanent error that names it.
        image = ctx.require("image", str)
        command = ctx.option("command", [], list)
        log.info(f"building {ctx.resource_name}")
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            # The host's name: a re-run after a crash finds the same Pod.
            "metadata": ctx.metadata(),
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": image, "command": command}],
            },
        }

    def get_task_phase(self, ctx: TaskContext, observed: dict) -> PhaseInfo:
        # Must answer for ANY object: read it with dig(), never observed[...].
        phase = dig(observed, "status", "phase")
        if phase == "Succeeded":
            return PhaseInfo.success({})
        if phase == "Failed":
            return PhaseInfo.retryable("Failed", dig(observed, "status", "message") or "the pod failed")
        if phase == "Running":
            return PhaseInfo.running().with_log_link(
                "Pod logs", f"kubectl logs -n {ctx.namespace} {ctx.resource_name}")
        return PhaseInfo.queued()


# componentize-py exports the class named after the WIT interface.
K8sTask = weft.export(MyTask)
