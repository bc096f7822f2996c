// The isolation guest (JavaScript): each call keeps its task's
// config.secret in a module variable and reports what an earlier call
// left there, in build-resource's ConfigMap (data.seen) and
// get-task-phase's outputs (seen). A host that gives every call a fresh
// (or reset) instance shows it nothing; one that reuses an instance leaks
// the secret. With config.fail true it stores the secret, then throws.
// The Rust twin is plugins/testing/leak; host/weft/tests/isolation.rs
// drives all four.
import { definePlugin, phase } from 'weft-plugin-sdk';

let seen = '';

// Swaps the variable for this task's secret; the earlier value.
function swap(ctx) {
  const before = seen;
  seen = String(ctx.config.secret ?? '');
  return before;
}

export const k8sTask = definePlugin({
  buildResource(ctx) {
    const before = swap(ctx);
    if (ctx.config.fail === true) {
      throw new Error('failing on purpose, with the secret stored');
    }
    return {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: ctx.resourceName },
      data: { seen: before },
    };
  },

  getTaskPhase(ctx) {
    return phase.success({ seen: swap(ctx) });
  },
});
