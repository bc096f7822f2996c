// Where a JavaScript task plugin's call goes: a measuring probe, not a
// plugin to run. Its build-resource times, in a loop inside one instance,
// the js-job example's export as the host calls it and the parts of that
// call, and answers the figures (µs per call) as a ConfigMap's data:
//
//   sdk/js/build.sh sdk/js/bench target/js-bench
//   weft plugin test target/js-bench/js-bench.wasm --task sdk/js/examples/k8s-job/task.json
//
// `python3 sdk/js/bench/native.py` runs the same code in QuickJS built
// natively (PyPI's quickjs) for the reference: what the same work costs
// without WebAssembly. docs/benchmarks.md ("Plugin languages") has the
// figures and what they say about the JavaScript row's floor.

import { clock, definePlugin, phase } from 'weft-plugin-sdk';
import { measure } from './measure.js';

export const k8sTask = definePlugin({
  warmUp: false,
  buildResource(ctx) {
    const wit = {
      workflow: ctx.workflow,
      namespace: ctx.namespace,
      nodeId: ctx.nodeId,
      attempt: ctx.attempt,
      taskType: ctx.taskType,
      config: JSON.stringify(ctx.config),
      inputs: JSON.stringify(ctx.inputs),
      resourceName: ctx.resourceName,
      labels: Object.entries(ctx.labels),
      pluginConfig: JSON.stringify(ctx.pluginConfig),
    };
    const nanos = () => Number(clock.monotonicNanos());
    return {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: ctx.metadata(),
      data: measure(nanos, wit),
    };
  },
  getTaskPhase() {
    return phase.running();
  },
});
