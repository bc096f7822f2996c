"""mark_pod_specs, natively: the annotation the host reads to move a task's
artifacts in the pods of a resource that is not a Pod.
`cd sdk/python && python3 -m unittest discover -s tests`."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import weft_plugin as weft  # noqa: E402


def job() -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "main", "image": "busybox", "command": ["true"]}]}}}}


class MarkPodSpecs(unittest.TestCase):
    def test_marks_a_job_and_a_list_first_one_first(self) -> None:
        j = weft.mark_pod_specs(job(), ["/spec/template/spec"])
        self.assertEqual(j["metadata"]["annotations"][weft.POD_SPECS_ANNOTATION],
                         '["/spec/template/spec"]')
        spec = job()["spec"]["template"]["spec"]
        two = {"kind": "PyTorchJob", "spec": {"r": [spec, spec]}}
        weft.mark_pod_specs(two, ["/spec/r/1", "/spec/r/0"])
        self.assertEqual(two["metadata"]["annotations"][weft.POD_SPECS_ANNOTATION],
                         '["/spec/r/1","/spec/r/0"]')

    def test_a_pointer_at_no_pod_spec_is_a_permanent_error_naming_it(self) -> None:
        for pointers, says in [
            (["/spec/template"], "/spec/template: not a pod spec (no containers)"),
            (["spec"], "spec: nothing there (a JSON Pointer starts with /)"),
            (["/spec/nope/spec"], "/spec/nope/spec: nothing there (a JSON Pointer starts with /)"),
            ([], "mark_pod_specs: no pod spec given (pass at least one JSON Pointer)"),
        ]:
            j = job()
            with self.assertRaises(weft.PluginError) as e:
                weft.mark_pod_specs(j, pointers)
            self.assertEqual(e.exception.message, says)
            self.assertFalse(e.exception.retryable)
            self.assertNotIn("annotations", j["metadata"])


if __name__ == "__main__":
    unittest.main()
