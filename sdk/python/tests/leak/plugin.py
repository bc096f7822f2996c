"""The isolation guest (Python): each call keeps its task's config.secret
in a module global and reports what an earlier call left there, in
build-resource's ConfigMap (data.seen) and get-task-phase's outputs
(seen). A host that gives every call a fresh (or reset) instance shows it
nothing; one that reuses an instance leaks the secret. With config.fail
true it stores the secret, then raises. The Rust twin is
plugins/testing/leak; host/weft/tests/isolation.rs drives all four.
"""

import weft_plugin as weft
from weft_plugin import PhaseInfo, TaskContext

SEEN = {"secret": ""}


def swap(ctx: TaskContext) -> str:
    """Swaps the global for this task's secret; the earlier value."""
    before = SEEN["secret"]
    SEEN["secret"] = str(ctx.config.get("secret", ""))
    return before


class Leak(weft.TaskPlugin):
    def build_resource(self, ctx: TaskContext) -> dict:
        before = swap(ctx)
        if ctx.config.get("fail") is True:
            raise RuntimeError("failing on purpose, with the secret stored")
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": ctx.resource_name},
            "data": {"seen": before},
        }

    def get_task_phase(self, ctx: TaskContext, observed: dict) -> PhaseInfo:
        return PhaseInfo.success({"seen": swap(ctx)})


K8sTask = weft.export(Leak)
