"""Native unit tests: `python3 -m unittest` in this directory (with
sdk/python on PYTHONPATH; see the README). No component is built: the
service is played by a responder (weft_plugin.http.set_responder)."""

import json
import unittest

from weft_plugin import Phase, PluginError, TaskContext, http

from plugin import HttpJob

plugin = HttpJob()
URL = "http://jobs.test"
CTX = TaskContext(config={"url": URL, "command": "train", "params": {"lr": 0.1}},
                  inputs={"epochs": 3}, resource_name="wf-train-0")


class Service:
    """Answers every request with ``(status, body)`` and keeps what it saw."""

    def __init__(self, status=200, body=None):
        self.answer = (status, body if body is not None else {})
        self.seen = []
        http.set_responder(self)

    def __call__(self, req):
        self.seen.append(req)
        status, body = self.answer
        return http.Response(status, {"content-type": "application/json"},
                             body if isinstance(body, bytes) else json.dumps(body))


class Create(unittest.TestCase):
    def tearDown(self):
        http.set_responder(None)

    def test_posts_the_job_with_the_key_as_id_and_header(self):
        service = Service(201, {"id": "wf-train-0"})
        meta = plugin.create(CTX, "wf-train-0")
        self.assertEqual(meta, f"{URL}/jobs/wf-train-0")
        req = service.seen[0]
        self.assertEqual((req.method, req.url), ("POST", f"{URL}/jobs"))
        self.assertEqual(req.json(), {"id": "wf-train-0", "command": "train",
                                      "params": {"lr": 0.1}, "inputs": {"epochs": 3}})
        self.assertIn(("Idempotency-Key", "wf-train-0"), req.headers)

    def test_a_conflict_adopts_the_existing_job(self):
        Service(409, {"error": "exists"})
        self.assertEqual(plugin.create(CTX, "wf-train-0"), f"{URL}/jobs/wf-train-0")

    def test_service_errors(self):
        for status, retryable in ((400, False), (503, True)):
            Service(status, {"error": "no"})
            with self.assertRaises(PluginError) as e:
                plugin.create(CTX, "wf-train-0")
            self.assertEqual(e.exception.retryable, retryable, status)

    def test_a_missing_command_is_permanent(self):
        Service()
        with self.assertRaises(PluginError) as e:
            plugin.create(TaskContext(config={"url": URL}), "k")
        self.assertFalse(e.exception.retryable)
        self.assertIn("command", e.exception.message)


class Get(unittest.TestCase):
    def tearDown(self):
        http.set_responder(None)

    def phase(self, status, body):
        Service(status, body)
        return plugin.get(CTX, f"{URL}/jobs/wf-train-0")

    def test_mapping(self):
        cases = [
            ({"state": "PENDING"}, Phase.QUEUED),
            ({"state": "RUNNING"}, Phase.RUNNING),
            ({"state": "SUCCEEDED", "result": {"accuracy": 0.9}}, Phase.SUCCESS),
            ({"state": "FAILED"}, Phase.RETRYABLE_FAILURE),
            ({"state": "STOPPED"}, Phase.PERMANENT_FAILURE),
            ({"state": "WARPING"}, Phase.QUEUED),
            ([], Phase.QUEUED),
        ]
        for body, want in cases:
            self.assertEqual(self.phase(200, body).phase, want, body)

    def test_success_has_the_result_and_a_link(self):
        info = self.phase(200, {"state": "SUCCEEDED", "result": {"accuracy": 0.9}})
        self.assertEqual(info.outputs, {"accuracy": 0.9})
        self.assertEqual(info.log_links[0].uri, f"{URL}/jobs/wf-train-0")

    def test_a_lost_job_is_a_retryable_failure(self):
        self.assertEqual(self.phase(404, {}).phase, Phase.RETRYABLE_FAILURE)

    def test_a_body_that_is_not_json_is_a_retryable_error(self):
        with self.assertRaises(PluginError) as e:
            self.phase(200, b"<html>")
        self.assertTrue(e.exception.retryable)


class Delete(unittest.TestCase):
    def tearDown(self):
        http.set_responder(None)

    def test_deletes_and_a_gone_job_is_fine(self):
        service = Service(204, b"")
        plugin.delete(CTX, f"{URL}/jobs/wf-train-0")
        self.assertEqual((service.seen[0].method, service.seen[0].url), ("DELETE", f"{URL}/jobs/wf-train-0"))
        Service(404, {})
        plugin.delete(CTX, f"{URL}/jobs/wf-train-0")

    def test_a_server_error_is_retryable(self):
        Service(500, {})
        with self.assertRaises(PluginError) as e:
            plugin.delete(CTX, f"{URL}/jobs/wf-train-0")
        self.assertTrue(e.exception.retryable)


if __name__ == "__main__":
    unittest.main()
