// The warm-up guest (JavaScript, webapi-task-plugin): counts the calls of
// create in a module variable, and, on the warm-up's own key, makes a
// request with the SDK's http and with fetch (both of which the SDK must
// answer itself, 200 with `{}`: no network at build time). Any other
// create answers the counts, so the snapshot's state shows:
// host/weft/tests/sdk_webapi.rs expects four warm-up rounds, each of whose
// requests was stood in for, and no request at run time.
import { defineWebApiPlugin, http, phase } from 'weft-plugin-sdk';

let creates = 0;
let stoodIn = 0;

export const webapiTask = defineWebApiPlugin({
  async create(ctx, idempotencyKey) {
    creates += 1;
    if (idempotencyKey !== 'warm-up-task-0') return `creates=${creates} stood_in=${stoodIn}`;
    const viaHttp = http.post('http://127.0.0.1:9/jobs', { json: { id: idempotencyKey } });
    const viaFetch = await fetch('http://127.0.0.1:9/jobs', { method: 'POST', body: '{}' });
    const body = await viaFetch.text();
    if (viaHttp.status === 200 && viaHttp.text() === '{}' && viaFetch.status === 200 && body === '{}') stoodIn += 1;
    return 'warm';
  },
  get() {
    return phase.queued();
  },
  delete() {},
});
