"""Native unit tests: PYTHONPATH=<sdk>/python python3 -m unittest"""

import unittest

from weft_plugin import Phase, PluginError, TaskContext

from plugin import MyTask

plugin = MyTask()


class MyTaskTest(unittest.TestCase):
    def test_builds_a_pod(self):
        pod = plugin.build_resource(TaskContext(config={"image": "busybox"}))
        self.assertEqual(pod["spec"]["containers"][0]["image"], "busybox")

    def test_a_missing_image_is_permanent(self):
        with self.assertRaises(PluginError) as e:
            plugin.build_resource(TaskContext(config={}))
        self.assertFalse(e.exception.retryable)

    def test_phases(self):
        self.assertEqual(plugin.get_task_phase(TaskContext(), {}).phase, Phase.QUEUED)
        done = plugin.get_task_phase(TaskContext(), {"status": {"phase": "Succeeded"}})
        self.assertEqual(done.phase, Phase.SUCCESS)


if __name__ == "__main__":
    unittest.main()
