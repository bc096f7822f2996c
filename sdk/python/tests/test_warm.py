"""The build-time warm-up (weft_plugin/_warm.py), natively: inside a
component it runs while componentize-py pre-initialises, with the
generated bindings; here a stand-in for the WIT task context takes their
place. `cd sdk/python && python3 -m unittest discover -s tests`."""

import os
import sys
import tempfile
import types
import unittest
from dataclasses import dataclass
from typing import List, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import weft_plugin as weft  # noqa: E402
from weft_plugin import _host, _warm, clock, http, log, state  # noqa: E402


@dataclass
class WitTaskContext:  # the generated wit_world.imports.types.TaskContext
    workflow: str
    namespace: str
    node_id: str
    attempt: int
    task_type: str
    config: str
    inputs: str
    resource_name: str
    labels: List[Tuple[str, str]]
    plugin_config: str


class Recorder(weft.TaskPlugin):
    def __init__(self):
        self.seen = []

    def build_resource(self, ctx):
        # What the host's imports answer while warming, and the context.
        self.seen.append(("build", ctx.config, ctx.inputs, ctx.resource_name,
                          state.get("k"), clock.now_millis(), _host.warming))
        log.info("not sent anywhere")
        state.set("k", b"v")
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": ctx.metadata()}

    def get_task_phase(self, ctx, observed):
        self.seen.append(("phase", weft.dig(observed, "status", "phase")))
        raise RuntimeError("a bug the warm-up must swallow")


class WarmUpTest(unittest.TestCase):
    def setUp(self):
        self.saved = _host.wit_types
        _host.wit_types = types.SimpleNamespace(TaskContext=WitTaskContext)

    def tearDown(self):
        _host.wit_types = self.saved

    def test_calls_the_plugin_on_the_sample_with_the_host_stood_in_for(self):
        cls = weft.export(Recorder)  # natively: no warm-up here
        self.assertEqual(cls.plugin.seen, [])
        _warm.warm_up(cls, cls.plugin, {"config": {"image": "alpine"}, "inputs": {"n": 1}})
        builds = [s for s in cls.plugin.seen if s[0] == "build"]
        self.assertEqual(len(builds), _warm.ROUNDS)
        self.assertEqual(builds[0], ("build", {"image": "alpine"}, {"n": 1}, "warm-up-task-0", None, 0, True))
        self.assertIn(("phase", "Running"), cls.plugin.seen)
        self.assertFalse(_host.warming)
        self.assertIsNone(state.get("k"))  # nothing reached the (native) store

    def test_reads_task_json_beside_the_plugin_module(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "task.json"), "w") as f:
                f.write('{"config": {"image": "from-file"}}')
            module = types.ModuleType("warm_sample_plugin")
            module.__file__ = os.path.join(d, "plugin.py")
            sys.modules[module.__name__] = module
            try:
                Sample = type("Sample", (Recorder,), {"__module__": module.__name__})
                cls = weft.export(Sample)
                _warm.warm_up(cls, cls.plugin)
            finally:
                del sys.modules[module.__name__]
        self.assertEqual(cls.plugin.seen[0][1], {"image": "from-file"})

    def test_an_empty_task_without_task_json(self):
        cls = weft.export(Recorder)
        _warm.warm_up(cls, cls.plugin)
        self.assertEqual(cls.plugin.seen[0][1:3], ({}, {}))


class WebApiRecorder(weft.WebApiPlugin):
    def __init__(self):
        self.seen = []

    def create(self, ctx, idempotency_key):
        resp = http.post("http://127.0.0.1:9/jobs", json={"id": idempotency_key})
        self.seen.append(("create", idempotency_key, ctx.config, resp.status, resp.json()))
        return "meta-" + idempotency_key

    def get(self, ctx, meta):
        self.seen.append(("get", meta, http.get(meta).status))
        raise RuntimeError("a bug the warm-up must swallow")

    def delete(self, ctx, meta):
        self.seen.append(("delete", meta))


class WebApiWarmUpTest(unittest.TestCase):
    def setUp(self):
        self.saved = _host.wit_types
        _host.wit_types = types.SimpleNamespace(TaskContext=WitTaskContext)
        self.asked = []
        http.set_responder(lambda req: self.asked.append(req))  # must never be asked

    def tearDown(self):
        _host.wit_types = self.saved
        http.set_responder(None)

    def test_calls_create_get_delete_with_requests_answered_by_the_sdk(self):
        cls = weft.export_webapi(WebApiRecorder)  # natively: no warm-up here
        self.assertEqual(cls.plugin.seen, [])
        _warm.warm_up_webapi(cls, cls.plugin, {"config": {"command": "x"}})
        seen = cls.plugin.seen
        self.assertEqual(seen.count(("create", "warm-up-task-0", {"command": "x"}, 200, {})), _warm.ROUNDS)
        self.assertEqual(seen.count(("get", "meta-warm-up-task-0", 200)), _warm.ROUNDS)
        self.assertEqual(seen.count(("delete", "meta-warm-up-task-0")), _warm.ROUNDS)
        self.assertEqual(self.asked, [])
        self.assertFalse(_host.warming)


class HttpTest(unittest.TestCase):
    def tearDown(self):
        http.set_responder(None)

    def test_json_bodies_and_headers(self):
        got = []
        http.set_responder(lambda req: got.append(req) or http.Response(201, {"X-A": "b"}, b'{"ok": true}'))
        resp = http.request("POST", "http://svc/jobs", headers={"Idempotency-Key": "k"}, json={"a": 1})
        self.assertEqual((resp.status, resp.ok, resp.json(), resp.headers), (201, True, {"ok": True}, {"x-a": "b"}))
        self.assertEqual(resp.url, "http://svc/jobs")
        req = got[0]
        self.assertEqual((req.method, req.body), ("POST", b'{"a":1}'))
        self.assertIn(("content-type", "application/json"), req.headers)
        self.assertIn(("content-length", "7"), req.headers)

    def test_raise_for_status(self):
        for status, retryable in ((400, False), (404, False), (408, True), (429, True), (500, True)):
            with self.assertRaises(weft.PluginError) as e:
                http.Response(status, {}, b"no", "http://svc/x").raise_for_status()
            self.assertEqual(e.exception.retryable, retryable, status)
            self.assertIn(f"http://svc/x answered {status}", e.exception.message)

    def test_not_a_url(self):
        http.set_responder(None)
        with self.assertRaises(http.HttpError) as e:
            http.get("ftp://svc/x")
        self.assertFalse(e.exception.retryable)


if __name__ == "__main__":
    unittest.main()
