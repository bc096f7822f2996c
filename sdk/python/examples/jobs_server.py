"""A toy jobs API for trying the http-job examples (Python and JavaScript)
with `weft plugin test`: the API they call, in memory, on loopback.

    python3 sdk/python/examples/jobs_server.py [PORT]     # default 8080

POST /jobs {"id", ...} makes job `id` (409 when it exists); GET /jobs/<id>
answers RUNNING twice, then SUCCEEDED with a result; DELETE /jobs/<id>
removes it (404 when it is not there). Not for anything but trying.
"""

import http.server
import json
import sys

JOBS = {}


class Handler(http.server.BaseHTTPRequestHandler):
    def answer(self, status, body=None):
        out = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def job_id(self):
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            job = json.loads(body)
            job_id = str(job["id"])
        except (ValueError, KeyError, TypeError):
            return self.answer(400, {"error": "want a JSON object with an id"})
        if job_id in JOBS:
            return self.answer(409, {"error": f"job {job_id} exists"})
        JOBS[job_id] = 0
        self.answer(201, {"id": job_id, "state": "PENDING"})

    def do_GET(self):
        job_id = self.job_id()
        if job_id not in JOBS:
            return self.answer(404, {"error": "no such job"})
        JOBS[job_id] += 1
        if JOBS[job_id] < 3:
            return self.answer(200, {"id": job_id, "state": "RUNNING", "message": f"poll {JOBS[job_id]}"})
        self.answer(200, {"id": job_id, "state": "SUCCEEDED", "result": {"accuracy": 0.93}})

    def do_DELETE(self):
        self.answer(204 if JOBS.pop(self.job_id(), None) is not None else 404)


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8080
    print(f"jobs API on http://127.0.0.1:{port}", flush=True)
    http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
