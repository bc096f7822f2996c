// js-job: runs a Weft task as a Kubernetes batch/v1 Job.
//
// Task config:
//   image: busybox:1.36          # required
//   command: [sh, -c]            # optional, the container's command
//   args: ['echo $WEFT_INPUT_X'] # optional, its args
//   env: {NAME: value}           # optional extra environment
//   resources: {...}             # optional container resources
//
// Inputs reach the container as environment variables: input `name`
// becomes WEFT_INPUT_<NAME> (upper-cased; characters other than A-Z0-9
// become `_`); strings as they are, other values as JSON.
//
// backoffLimit is 0: the Job never retries on its own, Weft does (a new
// attempt, a new Job), so retries follow the workflow's policy.
//
// Outputs of a successful task: {succeeded: <status.succeeded>}, with the
// task's output artifacts and file parameters when it declares them (its
// pod spec is marked for them with markPodSpecs).

import { definePlugin, dig, log, markPodSpecs, phase, PluginError } from 'weft-plugin-sdk';

function inputEnv(inputs) {
  return Object.keys(inputs)
    .sort()
    .map((name) => {
      const value = inputs[name];
      return {
        name: 'WEFT_INPUT_' + name.toUpperCase().replace(/[^A-Z0-9]/g, '_'),
        value: typeof value === 'string' ? value : JSON.stringify(value),
      };
    });
}

function stringList(ctx, key) {
  const list = ctx.option(key, undefined, 'array');
  if (list !== undefined && !list.every((s) => typeof s === 'string')) {
    throw PluginError.permanent(`invalid task config: \`${key}\` must be a list of strings`);
  }
  return list;
}

const text = (v) => (typeof v === 'string' && v !== '' ? v : undefined);
const count = (v) => (Number.isInteger(v) && v >= 0 ? v : 0);

const spec = {
  properties: { abort: 'delete', deleteOnFinish: false },

  buildResource(ctx) {
    const image = ctx.require('image', 'string');
    const command = stringList(ctx, 'command');
    const args = stringList(ctx, 'args');
    const extra = ctx.option('env', {}, 'object');
    const env = [
      ...inputEnv(ctx.inputs),
      ...Object.keys(extra).sort().map((name) => ({ name, value: String(extra[name]) })),
    ];
    const container = { name: 'main', image };
    if (command) container.command = command;
    if (args) container.args = args;
    if (env.length) container.env = env;
    const resources = ctx.option('resources', undefined, 'object');
    if (resources) container.resources = resources;

    log.debug(`Job ${ctx.resourceName}: image ${image}`);
    const job = {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: ctx.metadata(),
      spec: {
        backoffLimit: 0, // Weft retries, with a new attempt
        ttlSecondsAfterFinished: ctx.pluginOption('ttlSecondsAfterFinished', undefined, 'integer'),
        template: {
          metadata: { labels: { ...ctx.labels } },
          spec: { restartPolicy: 'Never', containers: [container] },
        },
      },
    };
    // A task's artifacts move in the Job's pod as in a Pod task's: the
    // host wraps the marked pod spec (it needs a `command`).
    return markPodSpecs(job, ['/spec/template/spec']);
  },

  getTaskPhase(ctx, observed) {
    const conditions = dig(observed, 'status', 'conditions');
    const list = Array.isArray(conditions) ? conditions : [];
    const holds = (type) => list.find((c) => dig(c, 'type') === type && dig(c, 'status') === 'True');

    const logs = `kubectl logs -n ${ctx.namespace} job/${ctx.resourceName}`;
    const complete = holds('Complete') ?? holds('SuccessCriteriaMet');
    if (complete) {
      return phase.success({ succeeded: count(dig(observed, 'status', 'succeeded')) });
    }
    const failed = holds('Failed') ?? holds('FailureTarget');
    if (failed) {
      return phase
        .retryable(text(dig(failed, 'reason')) ?? 'JobFailed', text(dig(failed, 'message')) ?? 'the Job failed')
        .withLogLink('Job logs', logs);
    }
    if (holds('Suspended')) return phase.waitingForResources('the Job is suspended');
    if (count(dig(observed, 'status', 'active')) > 0) {
      return phase.running().withLogLink('Job logs', logs);
    }
    return phase.queued();
  },
};

export const k8sTask = definePlugin(spec);
