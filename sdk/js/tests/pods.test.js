// markPodSpecs, natively: the annotation the host reads to move a task's
// artifacts in the pods of a resource that is not a Pod.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { markPodSpecs, POD_SPECS_ANNOTATION, PluginError } from 'weft-plugin-sdk';

const job = () => ({
  apiVersion: 'batch/v1',
  kind: 'Job',
  metadata: { name: 'j' },
  spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: 'busybox', command: ['true'] }] } } },
});

test('marks a Job template and a list of pod specs, first one first', () => {
  const j = markPodSpecs(job(), ['/spec/template/spec']);
  assert.equal(j.metadata.annotations[POD_SPECS_ANNOTATION], '["/spec/template/spec"]');
  const two = { kind: 'PyTorchJob', spec: { r: [job().spec.template.spec, job().spec.template.spec] } };
  markPodSpecs(two, ['/spec/r/1', '/spec/r/0']);
  assert.equal(two.metadata.annotations[POD_SPECS_ANNOTATION], '["/spec/r/1","/spec/r/0"]');
});

test('a pointer at no pod spec is a permanent error naming it', () => {
  for (const [pointers, says] of [
    [['/spec/template'], '/spec/template: not a pod spec (no containers)'],
    [['spec'], 'spec: nothing there (a JSON Pointer starts with /)'],
    [['/spec/nope/spec'], '/spec/nope/spec: nothing there (a JSON Pointer starts with /)'],
    [[], 'markPodSpecs: no pod spec given (pass at least one JSON Pointer)'],
  ]) {
    const j = job();
    assert.throws(() => markPodSpecs(j, pointers), (e) => e instanceof PluginError && !e.retryable && e.message === says);
    assert.equal(j.metadata.annotations, undefined);
  }
});
