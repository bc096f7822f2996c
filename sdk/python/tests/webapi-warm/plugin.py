"""The warm-up guest (Python, webapi-task-plugin): counts the calls of
create in a module global, and, on the warm-up's own key, makes a request
(which the SDK must answer itself, 200 with ``{}``: no network at build
time). Any other create answers the counts, so the snapshot's state shows:
host/weft/tests/sdk_webapi.rs expects four warm-up rounds, each of whose
requests was stood in for, and no request at run time.
"""

import weft_plugin as weft
from weft_plugin import PhaseInfo, http

COUNTS = {"creates": 0, "stood_in": 0}


class Warm(weft.WebApiPlugin):
    def create(self, ctx, idempotency_key):
        COUNTS["creates"] += 1
        if idempotency_key == "warm-up-task-0":
            resp = http.post("http://127.0.0.1:9/jobs", json={"id": idempotency_key})
            COUNTS["stood_in"] += resp.status == 200 and resp.json() == {}
            return "warm"
        return f"creates={COUNTS['creates']} stood_in={COUNTS['stood_in']}"

    def get(self, ctx, meta):
        return PhaseInfo.queued()

    def delete(self, ctx, meta):
        pass


WebapiTask = weft.export_webapi(Warm)
