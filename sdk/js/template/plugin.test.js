// Native unit tests: node --import <sdk>/js/testing/register.js --test
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Phase, PluginError, TaskContext } from 'weft-plugin-sdk';
import { k8sTask } from './plugin.js';

const plugin = k8sTask.impl;

test('builds a pod', () => {
  const pod = plugin.buildResource(new TaskContext({ config: { image: 'busybox' } }));
  assert.equal(pod.spec.containers[0].image, 'busybox');
});

test('a missing image is permanent', () => {
  assert.throws(() => plugin.buildResource(new TaskContext()), (e) => e instanceof PluginError && !e.retryable);
});

test('phases', () => {
  assert.equal(plugin.getTaskPhase(new TaskContext(), {}).phase, Phase.QUEUED);
  assert.equal(plugin.getTaskPhase(new TaskContext(), { status: { phase: 'Succeeded' } }).phase, Phase.SUCCESS);
});
