// The measurements of the probe (plugin.js), shared by the component and
// the native run (native.py). `nanos` is a clock in nanoseconds; `wit` a
// task context shaped as the host passes it (JSON text fields).

import { TaskContext } from 'weft-plugin-sdk';
import { k8sTask as job } from '../examples/k8s-job/plugin.js';

const CALLS = 2000;

export function measure(nanos, wit, calls = CALLS) {
  const out = {};
  const time = (label, fn) => {
    for (let i = 0; i < 20; i++) fn();
    const start = nanos();
    for (let i = 0; i < calls; i++) fn();
    out[label] = ((nanos() - start) / calls / 1000).toFixed(1);
  };
  const ctx = TaskContext.fromWit(wit);
  const built = job.impl.buildResource(ctx);
  time('1 js-job build-resource, the export as the host calls it', () => job.buildResource(wit));
  time('2 its context: TaskContext.fromWit (three JSON.parse)', () => TaskContext.fromWit(wit));
  time('3 its plugin code: the Job object', () => job.impl.buildResource(ctx));
  time('4 its answer: JSON.stringify of the Job', () => JSON.stringify(built));
  time('5 of 3: a global regular-expression replace', () => 'source-url'.toUpperCase().replace(/[^A-Z0-9]/g, '_'));
  time('6 an empty function call', () => undefined);
  out['answer bytes'] = String(JSON.stringify(built).length);
  out.context = JSON.stringify(wit); // the input, to compare runs by
  return out;
}
