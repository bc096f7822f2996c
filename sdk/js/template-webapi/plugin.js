// my-task: runs a Weft task as a job of a small HTTP jobs API.
//
// The service (any that speaks this, e.g. a team's own batch API):
//
//   POST   {url}/jobs        {id, command, params, inputs} -> 201 {id, state}
//                            (409 when a job with that id exists already)
//   GET    {url}/jobs/{id}   -> {state: PENDING|RUNNING|SUCCEEDED|FAILED|STOPPED,
//                                message?, result?}
//   DELETE {url}/jobs/{id}   -> 2xx (404 when it is gone)
//
// Task config:
//   command: train               # required: what the service runs
//   params: {lr: 0.1}            # optional, passed as they are
//   url: http://127.0.0.1:8080   # optional: the service (default: the plugin config's `url`)
//
// The job's id is the host's idempotency key (the attempt's resource name),
// also sent as the Idempotency-Key header: a create repeated after a
// controller crash finds the job it made (409) and adopts it. The meta the
// host keeps is the job's URL. Outputs of a successful job: its `result`.

import { defineWebApiPlugin, http, log, phase, PluginError } from 'weft-plugin-sdk';

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The jobs API's base URL: the task's `url`, else the plugin config's. */
function service(ctx) {
  const url = ctx.option('url', undefined, 'string') ?? ctx.pluginOption('url', undefined, 'string');
  if (!url) throw PluginError.permanent('no service URL: set `url` in the task config or the plugin config');
  return url.replace(/\/+$/, '');
}

export const webapiTask = defineWebApiPlugin({
  create(ctx, idempotencyKey) {
    const command = ctx.require('command', 'string');
    const params = ctx.option('params', {}, 'object');
    const jobUrl = `${service(ctx)}/jobs/${encodeURIComponent(idempotencyKey)}`;
    const resp = http.post(`${service(ctx)}/jobs`, {
      json: { id: idempotencyKey, command, params, inputs: ctx.inputs },
      headers: { 'Idempotency-Key': idempotencyKey },
    });
    if (resp.status === 409) {
      log.info(`job ${idempotencyKey} exists already: adopting it`);
      return jobUrl;
    }
    resp.raiseForStatus(); // 4xx permanent, 5xx retryable
    log.info(`created job ${idempotencyKey}`);
    return jobUrl;
  },

  get(ctx, meta) {
    const resp = http.get(meta);
    if (resp.status === 404) return phase.retryable('JobNotFound', `the service no longer knows ${meta}`);
    const body = resp.raiseForStatus().json();
    const job = isObject(body) ? body : {};
    const message = typeof job.message === 'string' ? job.message : undefined;
    let info;
    switch (job.state) {
      case 'SUCCEEDED':
        info = phase.success(isObject(job.result) ? job.result : {});
        break;
      case 'FAILED':
        info = phase.retryable('JobFailed', message ?? 'the job failed');
        break;
      case 'STOPPED':
        info = phase.permanent('JobStopped', message ?? 'the job was stopped');
        break;
      case 'RUNNING':
        info = phase.running(message);
        break;
      default: // PENDING, or a state this plugin does not know
        info = phase.queued(message);
    }
    return info.withLogLink('Job', meta);
  },

  delete(ctx, meta) {
    const resp = http.delete(meta);
    if (resp.status !== 404) resp.raiseForStatus(); // gone already: nothing to stop
  },
});
