// my-task: a Weft task plugin. Rename it in weft-plugin.yaml, then make
// buildResource and getTaskPhase your own.
//
// Build:  <sdk>/js/build.sh . out
// Test:   node --import <sdk>/js/testing/register.js --test
import { definePlugin, dig, log, phase } from 'weft-plugin-sdk';

// The entry module must export `k8sTask` (the WIT interface, camel-cased).
export const k8sTask = definePlugin({
  // Optional; this is the default.
  properties: { abort: 'delete', deleteOnFinish: false },

  buildResource(ctx) {
    // A missing or mistyped field is a permanent error that names it.
    const image = ctx.require('image', 'string');
    const command = ctx.option('command', [], 'array');
    log.info(`building ${ctx.resourceName}`);
    return {
      apiVersion: 'v1',
      kind: 'Pod',
      // The host's name: a re-run after a crash finds the same Pod.
      metadata: ctx.metadata(),
      spec: { restartPolicy: 'Never', containers: [{ name: 'main', image, command }] },
    };
  },

  getTaskPhase(ctx, observed) {
    // Must answer for ANY object: read it with dig(), never observed.status.x.
    switch (dig(observed, 'status', 'phase')) {
      case 'Succeeded':
        return phase.success({});
      case 'Failed':
        return phase.retryable('Failed', dig(observed, 'status', 'message') ?? 'the pod failed');
      case 'Running':
        return phase.running().withLogLink('Pod logs', `kubectl logs -n ${ctx.namespace} ${ctx.resourceName}`);
      default:
        return phase.queued();
    }
  },
});
