// Native unit tests: `node --import ../../testing/register.js --test` here
// (see the README). No component is built: the service is played by a
// responder (http.setResponder).
import { afterEach, test } from 'node:test';
import assert from 'node:assert/strict';

import { http, HttpResponse, Phase, PluginError, TaskContext } from 'weft-plugin-sdk';
import { webapiTask } from './plugin.js';

const plugin = webapiTask.impl;
const URL = 'http://jobs.test';
const JOB = `${URL}/jobs/wf-train-0`;
const ctx = new TaskContext({
  config: { url: URL, command: 'train', params: { lr: 0.1 } },
  inputs: { epochs: 3 },
  resourceName: 'wf-train-0',
});

/** Answers every request with (status, body) and keeps what it saw. */
function service(status = 200, body = {}) {
  const seen = [];
  http.setResponder((req) => {
    seen.push(req);
    return new HttpResponse(status, { 'content-type': 'application/json' }, typeof body === 'string' ? body : JSON.stringify(body));
  });
  return seen;
}

afterEach(() => http.setResponder(null));

test('create posts the job with the key as its id and Idempotency-Key', () => {
  const seen = service(201, { id: 'wf-train-0' });
  assert.equal(plugin.create(ctx, 'wf-train-0'), JOB);
  const [req] = seen;
  assert.deepEqual([req.method, req.url], ['POST', `${URL}/jobs`]);
  assert.deepEqual(req.json(), { id: 'wf-train-0', command: 'train', params: { lr: 0.1 }, inputs: { epochs: 3 } });
  assert.equal(req.headers['Idempotency-Key'], 'wf-train-0');
  assert.equal(req.headers['content-type'], 'application/json');
});

test('a conflict adopts the existing job; 4xx is permanent, 5xx retryable', () => {
  service(409, { error: 'exists' });
  assert.equal(plugin.create(ctx, 'wf-train-0'), JOB);
  for (const [status, retryable] of [[400, false], [503, true]]) {
    service(status, { error: 'no' });
    assert.throws(() => plugin.create(ctx, 'wf-train-0'), (e) => e instanceof PluginError && e.retryable === retryable);
  }
});

test('a missing command is a permanent error naming it', () => {
  service();
  assert.throws(
    () => plugin.create(new TaskContext({ config: { url: URL } }), 'k'),
    (e) => e instanceof PluginError && !e.retryable && /command/.test(e.message),
  );
});

test('get maps the job state to a phase', () => {
  const cases = [
    [{ state: 'PENDING' }, Phase.QUEUED],
    [{ state: 'RUNNING' }, Phase.RUNNING],
    [{ state: 'SUCCEEDED', result: { accuracy: 0.9 } }, Phase.SUCCESS],
    [{ state: 'FAILED' }, Phase.RETRYABLE_FAILURE],
    [{ state: 'STOPPED' }, Phase.PERMANENT_FAILURE],
    [{ state: 'WARPING' }, Phase.QUEUED],
    [[], Phase.QUEUED],
  ];
  for (const [body, want] of cases) {
    service(200, body);
    assert.equal(plugin.get(ctx, JOB).phase, want, JSON.stringify(body));
  }
  service(200, { state: 'SUCCEEDED', result: { accuracy: 0.9 } });
  const done = plugin.get(ctx, JOB);
  assert.deepEqual(done.outputs, { accuracy: 0.9 });
  assert.equal(done.logLinks[0].uri, JOB);
  service(404, {});
  assert.equal(plugin.get(ctx, JOB).phase, Phase.RETRYABLE_FAILURE);
  service(200, '<html>');
  assert.throws(() => plugin.get(ctx, JOB), (e) => e instanceof PluginError && e.retryable);
});

test('delete deletes; a job that is gone already is fine', () => {
  const seen = service(204, '');
  plugin.delete(ctx, JOB);
  assert.deepEqual([seen[0].method, seen[0].url], ['DELETE', JOB]);
  service(404, {});
  plugin.delete(ctx, JOB);
  service(500, {});
  assert.throws(() => plugin.delete(ctx, JOB), (e) => e instanceof PluginError && e.retryable);
});

test('without a responder, natively, a request fails naming it', () => {
  assert.throws(() => http.get(JOB), (e) => e instanceof PluginError && /setResponder/.test(e.message));
});
