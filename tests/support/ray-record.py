#!/usr/bin/env python3
"""Record the Ray Job Submission REST API exchanges of tests/fixtures/ray/.

    tests/support/ray-head.sh start target/ray-rec
    python3 tests/support/ray-record.py "$(cat target/ray-rec/dashboard_url)" tests/fixtures/ray
    tests/support/ray-head.sh stop target/ray-rec

Standard library only (it speaks HTTP the way the plugin will, not through Ray's SDK).
Each scenario becomes one NN-name.json (format: tests/fixtures/ray/README.md). Polls that
answer the same status again are recorded once. Machine-specific values are sanitised: the
head's ports become Ray's defaults (dashboard 8265, agent 52365, GCS 6379), the venv path
<venv> and the run's time in the submission ids 000000.
"""

import json
import os
import re
import sys
import time
import urllib.error
import urllib.request

BASE = sys.argv[1].rstrip("/")
OUT = sys.argv[2]
RUN = time.strftime("%H%M%S")  # submission ids are unique per recording run
VENV = os.path.realpath(os.path.join(os.path.dirname(__file__), "../../target/ray-venv"))


def sanitise(text):
    dash_port = BASE.rsplit(":", 1)[1]
    text = text.replace(f"127.0.0.1:{dash_port}", "127.0.0.1:8265")
    text = re.sub(r"http://127\.0\.0\.1:\d+(?=\")", "http://127.0.0.1:52365", text)
    text = re.sub(r"(address:? )127\.0\.0\.1:\d+", r"\g<1>127.0.0.1:6379", text)  # the GCS
    text = text.replace(VENV, "<venv>")
    text = re.sub(r"\b" + RUN + r"\b", "000000", text)
    return text


def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            status, ctype, raw = r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        status, ctype, raw = e.code, e.headers.get("Content-Type", ""), e.read()
    text = raw.decode()
    parsed = json.loads(text) if ctype.startswith("application/json") else text
    request = {"method": method, "path": path}
    if data is not None:
        request["headers"] = {"content-type": "application/json"}
        request["body"] = body
    exchange = {
        "request": request,
        "response": {"status": status, "headers": {"content-type": ctype}, "body": parsed},
    }
    return exchange, parsed


class Scenario:
    def __init__(self, name, description):
        self.name, self.description, self.exchanges = name, description, []

    def call(self, method, path, body=None):
        ex, parsed = call(method, path, body)
        self.exchanges.append(ex)
        return parsed

    def poll(self, sid, until, timeout=60):
        """GET the job until its status is in `until`; repeats of a status are dropped."""
        last, deadline = None, time.time() + timeout
        while time.time() < deadline:
            ex, job = call("GET", f"/api/jobs/{sid}")
            if job["status"] != last:
                self.exchanges.append(ex)
                last = job["status"]
            if last in until:
                return job
            time.sleep(0.2)
        raise SystemExit(f"{self.name}: {sid} still {last} after {timeout}s")

    def save(self):
        doc = {
            "description": self.description,
            "ray_version": call("GET", "/api/version")[1]["ray_version"],
            "exchanges": self.exchanges,
        }
        path = os.path.join(OUT, self.name + ".json")
        with open(path, "w") as f:
            f.write(sanitise(json.dumps(doc, indent=2)) + "\n")
        print(path)


def sid(name):
    return f"weft-{name}-{RUN}"


def main():
    os.makedirs(OUT, exist_ok=True)
    terminal = {"SUCCEEDED", "FAILED", "STOPPED"}

    s = Scenario(
        "01-succeeded",
        "create (POST with metadata and runtime_env.env_vars), get until SUCCEEDED, logs. "
        "The entrypoint prints its outputs as one JSON line, the way a plugin can read them back from the logs.",
    )
    ok = sid("ok")
    s.call("POST", "/api/jobs/", {
        "entrypoint": "python -c \"import json, os; print('hello from ray'); "
                      "print(json.dumps({'weft.outputs': {'answer': 6 * 7, 'greeting': os.environ['WEFT_GREETING']}}))\"",
        "submission_id": ok,
        "metadata": {"weft.io/workflow": "wf-1", "weft.io/node": "ray-ok"},
        "runtime_env": {"env_vars": {"WEFT_GREETING": "hi"}},
    })
    s.poll(ok, terminal)
    s.call("GET", f"/api/jobs/{ok}/logs")
    s.save()

    s = Scenario("02-failed", "an entrypoint that raises: FAILED, error_type JOB_ENTRYPOINT_COMMAND_ERROR, message ends with the traceback")
    bad = sid("raise")
    s.call("POST", "/api/jobs/", {
        "entrypoint": "python -c \"raise ValueError('boom 42')\"",
        "submission_id": bad,
        "metadata": {"weft.io/node": "ray-raise"},
    })
    s.poll(bad, terminal)
    s.call("GET", f"/api/jobs/{bad}/logs")
    s.save()

    s = Scenario("03-stopped", "a long job stopped: POST stop answers stopped true, the job ends STOPPED; a second stop answers stopped false")
    long = sid("stop")
    s.call("POST", "/api/jobs/", {
        "entrypoint": "python -c \"import time; print('sleeping', flush=True); time.sleep(300)\"",
        "submission_id": long,
    })
    s.poll(long, {"RUNNING"} | terminal)
    time.sleep(1)
    s.call("POST", f"/api/jobs/{long}/stop")
    s.poll(long, terminal)
    s.call("POST", f"/api/jobs/{long}/stop")
    s.call("GET", f"/api/jobs/{long}/logs")
    s.save()

    s = Scenario(
        "04-duplicate-submission",
        "create again with a submission_id that exists: 500 text/plain (a traceback ending in "
        "'Job with submission_id ... already exists'); a GET then finds the first job, unchanged",
    )
    s.call("POST", "/api/jobs/", {"entrypoint": "python -c \"print('second')\"", "submission_id": ok})
    s.call("GET", f"/api/jobs/{ok}")
    s.save()

    s = Scenario("05-not-found", "an unknown submission_id: 404 text/plain on get, logs and stop")
    s.call("GET", "/api/jobs/weft-no-such-job")
    s.call("GET", "/api/jobs/weft-no-such-job/logs")
    s.call("POST", "/api/jobs/weft-no-such-job/stop")
    s.save()

    s = Scenario("06-command-not-found", "an entrypoint whose command does not exist: FAILED, exit code 127")
    nf = sid("nocmd")
    s.call("POST", "/api/jobs/", {"entrypoint": "weft-no-such-command --flag", "submission_id": nf})
    s.poll(nf, terminal)
    s.save()

    s = Scenario(
        "07-ray-driver",
        "an entrypoint that uses Ray itself (ray.init, a remote task): job_id and driver_info are filled in then",
    )
    drv = sid("driver")
    s.call("POST", "/api/jobs/", {
        "entrypoint": "python -c \"import ray; ray.init(); print(ray.get(ray.remote(lambda x: x * 2).remote(21)))\"",
        "submission_id": drv,
    })
    s.poll(drv, terminal, timeout=120)
    s.call("GET", f"/api/jobs/{drv}/logs")
    s.save()

    s = Scenario("08-bad-request", "create without an entrypoint, and with a field Ray does not know: 400 text/plain")
    s.call("POST", "/api/jobs/", {"submission_id": sid("noentry")})
    s.call("POST", "/api/jobs/", {"entrypoint": "true", "submission_id": sid("extra"), "weft": 1})
    s.save()

    s = Scenario(
        "09-pending-unschedulable",
        "a job asking for more CPUs than the head has stays PENDING (until RAY_JOB_START_TIMEOUT_SECONDS, 900 s "
        "by default, then FAILED); stop answers stopped true but the job stays PENDING (the stop waits for the "
        "job's supervisor actor, which cannot be placed), and DELETE is refused",
    )
    pend = sid("pending")
    s.call("POST", "/api/jobs/", {"entrypoint": "true", "submission_id": pend, "entrypoint_num_cpus": 4})
    time.sleep(3)
    s.call("GET", f"/api/jobs/{pend}")
    s.call("POST", f"/api/jobs/{pend}/stop")
    time.sleep(5)
    s.call("GET", f"/api/jobs/{pend}")
    s.save()

    s = Scenario("10-delete", "DELETE of a running job is refused (500 text/plain, 'non-terminal state RUNNING'), of a finished one answers deleted true; then get is 404")
    d = sid("delete")
    s.call("POST", "/api/jobs/", {"entrypoint": "python -c \"import time; time.sleep(300)\"", "submission_id": d})
    s.poll(d, {"RUNNING"} | terminal)
    s.call("DELETE", f"/api/jobs/{d}")
    s.call("POST", f"/api/jobs/{d}/stop")
    s.poll(d, terminal)
    s.call("DELETE", f"/api/jobs/{d}")
    s.call("GET", f"/api/jobs/{d}")
    s.save()

    s = Scenario(
        "11-stop-while-pending",
        "stop right after create, while the job is PENDING: stopped true, the job passes through RUNNING and ends STOPPED",
    )
    q = sid("quickstop")
    s.call("POST", "/api/jobs/", {"entrypoint": "python -c \"import time; time.sleep(300)\"", "submission_id": q})
    s.call("POST", f"/api/jobs/{q}/stop")
    s.poll(q, terminal)
    s.save()


if __name__ == "__main__":
    main()
