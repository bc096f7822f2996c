"""Native unit tests: `python3 -m unittest` in this directory (with
sdk/python on PYTHONPATH; see the README). No component is built."""

import json
import unittest

from weft_plugin import Phase, PluginError, TaskContext

from plugin import RayJob

plugin = RayJob()
CONFIG = {"entrypoint": "python train.py", "image": "rayproject/ray:2.41.0", "workers": 2}


class BuildResource(unittest.TestCase):
    def test_a_rayjob_with_head_and_workers(self):
        ctx = TaskContext(namespace="ml", resource_name="wf-fit-0", labels={"a": "b"},
                          config=CONFIG, inputs={"epochs": 3, "name": "x"})
        obj = plugin.build_resource(ctx)
        self.assertEqual((obj["apiVersion"], obj["kind"]), ("ray.io/v1", "RayJob"))
        self.assertEqual(obj["metadata"], {"name": "wf-fit-0", "namespace": "ml", "labels": {"a": "b"}})
        spec = obj["spec"]
        self.assertEqual(spec["entrypoint"], "python train.py")
        self.assertIs(spec["shutdownAfterJobFinishes"], True)
        self.assertEqual(spec["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"], 2)
        env = json.loads(spec["runtimeEnvYAML"])["env_vars"]
        self.assertEqual(env, {"WEFT_INPUT_EPOCHS": "3", "WEFT_INPUT_NAME": "x"})

    def test_a_missing_entrypoint_is_a_permanent_error_naming_it(self):
        with self.assertRaises(PluginError) as e:
            plugin.build_resource(TaskContext(config={"image": "ray"}))
        self.assertFalse(e.exception.retryable)
        self.assertIn("entrypoint", e.exception.message)

    def test_workers_of_the_wrong_type(self):
        for bad in ("2", True, -1):
            with self.assertRaises(PluginError):
                plugin.build_resource(TaskContext(config={**CONFIG, "workers": bad}))


class GetTaskPhase(unittest.TestCase):
    def phase(self, status):
        return plugin.get_task_phase(TaskContext(), {"status": status})

    def test_success_has_the_job_id_and_dashboard(self):
        info = self.phase({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED",
                           "jobId": "j1", "dashboardURL": "head:8265"})
        self.assertEqual(info.phase, Phase.SUCCESS)
        self.assertEqual(info.outputs, {"jobId": "j1"})
        self.assertEqual(info.log_links[0].uri, "http://head:8265")

    def test_mapping(self):
        cases = [
            ({}, Phase.QUEUED),
            ({"jobDeploymentStatus": "Initializing"}, Phase.INITIALIZING),
            ({"jobDeploymentStatus": "Running", "jobStatus": "PENDING"}, Phase.INITIALIZING),
            ({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}, Phase.RUNNING),
            ({"jobDeploymentStatus": "Complete", "jobStatus": "FAILED"}, Phase.RETRYABLE_FAILURE),
            ({"jobDeploymentStatus": "Complete", "jobStatus": "STOPPED"}, Phase.PERMANENT_FAILURE),
            ({"jobDeploymentStatus": "Failed", "reason": "ValidationFailed"}, Phase.PERMANENT_FAILURE),
            ({"jobDeploymentStatus": "Failed", "reason": "SubmissionFailed"}, Phase.RETRYABLE_FAILURE),
            ({"jobDeploymentStatus": "Suspended"}, Phase.WAITING_FOR_RESOURCES),
            ({"jobDeploymentStatus": "Warping"}, Phase.QUEUED),
        ]
        for status, want in cases:
            self.assertEqual(self.phase(status).phase, want, status)

    def test_failure_carries_the_message(self):
        info = self.phase({"jobDeploymentStatus": "Failed", "reason": "AppFailed", "message": "exit 1"})
        self.assertEqual((info.reason, info.message), ("AppFailed", "exit 1"))

    def test_garbage_never_raises(self):
        for obj in ({}, {"status": None}, {"status": "x"}, {"status": []},
                    {"status": {"jobStatus": 7, "jobDeploymentStatus": [], "dashboardURL": {}}}):
            plugin.get_task_phase(TaskContext(), obj)


if __name__ == "__main__":
    unittest.main()
