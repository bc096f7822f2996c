// Native unit tests: `node --import ../../testing/register.js --test` here
// (see the README). No component is built.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Phase, PluginError, TaskContext } from 'weft-plugin-sdk';
import { k8sTask } from './plugin.js';

const plugin = k8sTask.impl;
const ctx = (fields = {}) => new TaskContext({ namespace: 'data', resourceName: 'etl-extract-0', ...fields });

test('a Job with the image, command, args and inputs as env', () => {
  const job = plugin.buildResource(ctx({
    labels: { a: 'b' },
    config: { image: 'busybox', command: ['sh', '-c'], args: ['echo hi'] },
    inputs: { day: 1, 'source-url': 's3://x' },
  }));
  assert.equal(job.kind, 'Job');
  assert.deepEqual(job.metadata, { name: 'etl-extract-0', namespace: 'data', labels: { a: 'b' },
    annotations: { 'weft.dev/pod-specs': '["/spec/template/spec"]' } });
  assert.equal(job.spec.backoffLimit, 0);
  const c = job.spec.template.spec.containers[0];
  assert.deepEqual([c.image, c.command, c.args], ['busybox', ['sh', '-c'], ['echo hi']]);
  assert.deepEqual(c.env, [
    { name: 'WEFT_INPUT_DAY', value: '1' },
    { name: 'WEFT_INPUT_SOURCE_URL', value: 's3://x' },
  ]);
});

test('a missing image is a permanent error naming it', () => {
  assert.throws(() => plugin.buildResource(ctx({ config: {} })),
    (e) => e instanceof PluginError && !e.retryable && e.message.includes('image'));
  assert.throws(() => plugin.buildResource(ctx({ config: { image: 'x', args: 'echo' } })), PluginError);
});

test('phases from the conditions', () => {
  const at = (status) => plugin.getTaskPhase(ctx(), { status });
  const ok = at({ succeeded: 1, conditions: [{ type: 'Complete', status: 'True' }] });
  assert.equal(ok.phase, Phase.SUCCESS);
  assert.deepEqual(ok.outputs, { succeeded: 1 });
  const failed = at({ conditions: [{ type: 'Failed', status: 'True', reason: 'DeadlineExceeded', message: 'too slow' }] });
  assert.deepEqual([failed.phase, failed.reason, failed.message], [Phase.RETRYABLE_FAILURE, 'DeadlineExceeded', 'too slow']);
  assert.equal(at({ active: 1 }).phase, Phase.RUNNING);
  assert.equal(at({}).phase, Phase.QUEUED);
  assert.equal(at({ conditions: [{ type: 'Complete', status: 'False' }] }).phase, Phase.QUEUED);
});

test('garbage never throws', () => {
  for (const obj of [{}, { status: null }, { status: 'x' }, { status: [] },
    { status: { conditions: 'none', active: '1' } }, { status: { conditions: [null, 7, { type: [] }] } }]) {
    plugin.getTaskPhase(ctx(), obj);
  }
});

test('the WIT export: JSON in, JSON out, errors as plugin-error', () => {
  const wit = { workflow: 'w', namespace: 'n', nodeId: 'x', attempt: 0, taskType: 'job', resourceName: 'w-x-0',
    labels: [['k', 'v']], config: '{"image":"busybox"}', inputs: '{}', pluginConfig: '{}' };
  const job = JSON.parse(k8sTask.buildResource(wit));
  assert.equal(job.metadata.labels.k, 'v');
  assert.throws(() => k8sTask.buildResource({ ...wit, config: '{}' }), (e) => e.retryable === false);
  const info = k8sTask.getTaskPhase(wit, '{"status":{"succeeded":2,"conditions":[{"type":"Complete","status":"True"}]}}');
  assert.deepEqual([info.phase, info.outputs], ['success', '{"succeeded":2}']);
  assert.deepEqual(k8sTask.properties(), { abort: 'delete', deleteOnFinish: false });
});
