// Write Weft task plugins in JavaScript.
//
// A task plugin turns a workflow task into a Kubernetes resource and says
// what the resource's state means (Flyte's BuildResource / GetTaskPhase).
// The host runs it as a sandboxed WebAssembly component of the
// `k8s-task-plugin` world of `weft:plugin@0.1.0`; ComponentizeJS builds that
// component from your module and this one (see README.md).
//
//   import { definePlugin, phase, PluginError, dig, log } from '../weft-plugin.js';
//
//   export const k8sTask = definePlugin({
//     buildResource(ctx) {
//       const image = ctx.require('image', 'string');     // missing -> permanent error
//       return { apiVersion: 'v1', kind: 'Pod', metadata: ctx.metadata(),
//                spec: { restartPolicy: 'Never', containers: [{ name: 'main', image }] } };
//     },
//     getTaskPhase(ctx, observed) {
//       switch (dig(observed, 'status', 'phase')) {         // never throws
//         case 'Succeeded': return phase.success();
//         case 'Failed': return phase.retryable('Failed', 'the pod failed');
//         case 'Running': return phase.running();
//         default: return phase.queued();
//       }
//     },
//   });
//
// The entry module must export `k8sTask` (the WIT interface `k8s-task`,
// camel-cased). The host's imports are wrapped in `log`, `clock` and
// `state` below. Natively (node --test with testing/register.js) the same
// code runs against stand-ins: see testing/host.js.

import { log as hostLog } from 'weft:plugin/log@0.1.0';
import * as hostClock from 'weft:plugin/clock@0.1.0';
import * as hostState from 'weft:plugin/state@0.1.0';
// What build.sh knows: whether this is the component (false under the native
// test hooks) and the plugin's task.json (or null), for the warm-up.
import { inComponent, sampleTask } from 'weft-plugin-sdk/build';

// ---------------------------------------------------------------------------
// Host imports
// ---------------------------------------------------------------------------

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error'];

// True while the build-time warm-up runs (see warmUp below): the host's
// imports cannot be called yet, so log, clock and state answer without them.
let warming = false;

function logAt(level, message) {
  const line = String(message);
  if (!warming) hostLog(LEVELS.includes(level) ? level : 'info', line);
}

/** Log lines that land in the host's log under the plugin's name, with a
 * level (prefer them to console.log). */
export const log = {
  log: logAt,
  trace: (m) => logAt('trace', m),
  debug: (m) => logAt('debug', m),
  info: (m) => logAt('info', m),
  warn: (m) => logAt('warn', m),
  error: (m) => logAt('error', m),
};

/** The host's clocks (a plugin needs no WASI for the time). */
export const clock = {
  /** Wall-clock milliseconds since the Unix epoch, a Number. */
  nowMillis: () => (warming ? 0 : Number(hostClock.nowMillis())),
  /** Monotonic nanoseconds, a BigInt (for durations inside one call). */
  monotonicNanos: () => (warming ? 0n : BigInt(hostClock.monotonicNanos())),
};

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A small key/value store per plugin that outlives a call: instances are
 * fresh for every call, so it is the only memory a plugin keeps. */
export const state = {
  /** The value (a Uint8Array), or undefined when missing or expired. */
  get(key) {
    if (warming) return undefined;
    const v = hostState.get(key);
    return v == null ? undefined : v;
  },
  /** The value decoded as UTF-8 text, or undefined. */
  getText(key) {
    const v = state.get(key);
    return v === undefined ? undefined : decoder.decode(v);
  },
  /** Stores a Uint8Array or a string (UTF-8), optionally expiring after
   * `ttlMillis`. Throws an Error when the host refuses it (too large). */
  set(key, value, ttlMillis) {
    const bytes = typeof value === 'string' ? encoder.encode(value) : value;
    if (warming) return;
    try {
      hostState.set(key, bytes, ttlMillis == null ? undefined : BigInt(ttlMillis));
    } catch (e) {
      const why = e && e.payload !== undefined ? e.payload : e;
      throw new Error(`state.set(${JSON.stringify(key)}): ${why}`);
    }
  },
  /** Removes a key; removing a missing key is not an error. */
  delete(key) {
    if (warming) return;
    hostState['delete'](key);
  },
};

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/** An error a plugin returns on purpose (the WIT `plugin-error`): throw it
 * from buildResource or getTaskPhase and the host gets the call's `err`. */
export class PluginError extends Error {
  constructor(message, retryable = false) {
    super(message);
    this.name = 'PluginError';
    this.retryable = Boolean(retryable);
  }
  /** An error no retry fixes (a bad config). */
  static permanent(message) {
    return new PluginError(message, false);
  }
  /** An error a new attempt may not have (an API that did not answer). */
  static retryable(message) {
    return new PluginError(message, true);
  }
}

// ---------------------------------------------------------------------------
// Phases
// ---------------------------------------------------------------------------

/** Where a task stands: flytepropeller's plugin phases (the WIT enum's values). */
export const Phase = Object.freeze({
  NOT_READY: 'not-ready',
  QUEUED: 'queued',
  WAITING_FOR_RESOURCES: 'waiting-for-resources',
  INITIALIZING: 'initializing',
  RUNNING: 'running',
  SUCCESS: 'success',
  RETRYABLE_FAILURE: 'retryable-failure',
  PERMANENT_FAILURE: 'permanent-failure',
});

const PHASES = new Set(Object.values(Phase));

/** The answer to "where does this task stand?". Build it with `phase.*` and
 * refine it with the `with*` methods, which return `this`:
 *
 *   phase.retryable('OOMKilled', 'exit 137').withLogLink('Logs', uri)
 */
export class PhaseInfo {
  constructor(p, { reason, message, outputs, logLinks } = {}) {
    if (!PHASES.has(p)) throw new TypeError(`unknown phase ${JSON.stringify(p)}`);
    this.phase = p;
    this.reason = reason ?? undefined;
    this.message = message ?? undefined;
    this.outputs = outputs ?? undefined;
    this.logLinks = logLinks ? [...logLinks] : [];
  }
  /** Sets the reason. */
  withReason(reason) {
    this.reason = reason ?? undefined;
    return this;
  }
  /** Sets the message. */
  withMessage(message) {
    this.message = message ?? undefined;
    return this;
  }
  /** Adds a link to logs or a UI; a missing or empty `uri` is skipped, so
   * `withLogLink('Dashboard', dig(obj, 'status', 'url'))` is safe. */
  withLogLink(name, uri) {
    if (typeof uri === 'string' && uri !== '') this.logLinks.push({ name: String(name), uri });
    return this;
  }
  /** Whether the task is over. */
  isTerminal() {
    return [Phase.SUCCESS, Phase.RETRYABLE_FAILURE, Phase.PERMANENT_FAILURE].includes(this.phase);
  }
}

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Constructors of PhaseInfo, one per phase. */
export const phase = {
  /** The task cannot start yet, and why. */
  notReady: (message) => new PhaseInfo(Phase.NOT_READY, { message }),
  /** Accepted, waiting to be scheduled. */
  queued: (message) => new PhaseInfo(Phase.QUEUED, { message }),
  /** Waiting for capacity (quota, nodes), and why. */
  waitingForResources: (message) => new PhaseInfo(Phase.WAITING_FOR_RESOURCES, { message }),
  /** Scheduled and starting. */
  initializing: (message) => new PhaseInfo(Phase.INITIALIZING, { message }),
  /** Running. */
  running: (message) => new PhaseInfo(Phase.RUNNING, { message }),
  /** Succeeded, with outputs (a plain object) or none. */
  success(outputs) {
    if (outputs != null && !isObject(outputs)) {
      throw new TypeError('success outputs must be a plain object (a JSON object)');
    }
    return new PhaseInfo(Phase.SUCCESS, { outputs });
  },
  /** A failure of the task that a new attempt may fix. */
  retryable: (reason, message) => new PhaseInfo(Phase.RETRYABLE_FAILURE, { reason, message }),
  /** A failure no retry will fix (bad image, invalid spec). */
  permanent: (reason, message) => new PhaseInfo(Phase.PERMANENT_FAILURE, { reason, message }),
  /** A failure of the platform (eviction, node loss): retryable, counted on
   * the system retry budget (the reason gets the `System:` prefix). */
  system: (reason, message) =>
    new PhaseInfo(Phase.RETRYABLE_FAILURE, { reason: `System:${reason}`, message }),
};

// ---------------------------------------------------------------------------
// Safe access to observed objects
// ---------------------------------------------------------------------------

/** `obj[p0][p1]...`, or `undefined` when a step is missing or of the wrong
 * shape (a key on an array, an index past the end, a null). getTaskPhase
 * must answer for any object, even partial and garbage ones: read observed
 * objects with this rather than `.`:
 *
 *   dig(observed, 'status', 'conditions', 0, 'type')
 */
export function dig(obj, ...path) {
  let cur = obj;
  for (const p of path) {
    if (typeof p === 'number') {
      if (!Array.isArray(cur) || !Number.isInteger(p) || p < 0 || p >= cur.length) return undefined;
    } else if (!isObject(cur) || !Object.prototype.hasOwnProperty.call(cur, p)) {
      return undefined;
    }
    cur = cur[p];
  }
  return cur ?? undefined;
}

// ---------------------------------------------------------------------------
// The task context
// ---------------------------------------------------------------------------

const KINDS = {
  string: (v) => typeof v === 'string',
  number: (v) => typeof v === 'number' && Number.isFinite(v),
  integer: (v) => Number.isInteger(v),
  boolean: (v) => typeof v === 'boolean',
  object: isObject,
  array: Array.isArray,
};

function field(obj, what, key, kind, required, dflt) {
  const v = isObject(obj) ? obj[key] : undefined;
  if (v == null) {
    if (required) throw PluginError.permanent(`invalid task ${what}: missing field \`${key}\``);
    return dflt;
  }
  if (kind !== undefined) {
    const check = KINDS[kind];
    if (!check) throw new TypeError(`unknown kind ${kind}: use ${Object.keys(KINDS).join(', ')}`);
    if (!check(v)) {
      const article = /^[aeiou]/.test(kind) ? 'an' : 'a';
      throw PluginError.permanent(
        `invalid task ${what}: \`${key}\` must be ${article} ${kind}, not ${String(JSON.stringify(v)).slice(0, 80)}`,
      );
    }
  }
  return v;
}

/** Everything the host tells a task plugin about a task. `config`,
 * `inputs` and `pluginConfig` arrive as JSON text and are parsed into
 * objects; `labels` is an object. Every field has a default, so tests can
 * write `new TaskContext({ config: { image: 'alpine' } })`. */
export class TaskContext {
  constructor(fields = {}) {
    this.workflow = fields.workflow ?? 'example';
    this.namespace = fields.namespace ?? 'default';
    this.nodeId = fields.nodeId ?? 'task';
    this.attempt = fields.attempt ?? 0;
    this.taskType = fields.taskType ?? '';
    this.config = fields.config ?? {};
    this.inputs = fields.inputs ?? {};
    this.resourceName = fields.resourceName ?? 'example-task-0';
    this.labels = fields.labels ?? {};
    this.pluginConfig = fields.pluginConfig ?? {};
  }

  /** The task config's `key`; a permanent PluginError naming it when it is
   * missing or, with `kind` ('string', 'number', 'integer', 'boolean',
   * 'object', 'array'), of the wrong type. */
  require(key, kind) {
    return field(this.config, 'config', key, kind, true);
  }

  /** The task config's `key`, or `dflt` when missing or null; a permanent
   * error when present with the wrong kind. */
  option(key, dflt, kind) {
    return field(this.config, 'config', key, kind, false, dflt);
  }

  /** The plugin config's `key` (manifest defaults merged with the
   * operator's overrides), or `dflt`. */
  pluginOption(key, dflt, kind) {
    return field(this.pluginConfig, 'plugin config', key, kind, false, dflt);
  }

  /** `{name: resourceName, namespace, labels}` plus `extra`: use the host's
   * name, so a re-run after a crash finds the same resource. */
  metadata(extra = {}) {
    return { name: this.resourceName, namespace: this.namespace, labels: { ...this.labels }, ...extra };
  }

  /** The context from the WIT record (JSON text fields, label tuples). */
  static fromWit(ctx) {
    const parse = (what, text) => {
      let v;
      try {
        v = text ? JSON.parse(text) : {};
      } catch (e) {
        throw PluginError.permanent(`the host sent ${what} that is not JSON: ${e.message}`);
      }
      return isObject(v) ? v : {};
    };
    return new TaskContext({
      workflow: ctx.workflow,
      namespace: ctx.namespace,
      nodeId: ctx.nodeId,
      attempt: ctx.attempt,
      taskType: ctx.taskType,
      config: parse('a config', ctx.config),
      inputs: parse('inputs', ctx.inputs),
      resourceName: ctx.resourceName,
      labels: Object.fromEntries(ctx.labels ?? []),
      pluginConfig: parse('a plugin config', ctx.pluginConfig),
    });
  }
}

// ---------------------------------------------------------------------------
// The export
// ---------------------------------------------------------------------------

// Runs one call: a PluginError becomes the WIT error (ComponentizeJS turns a
// thrown value into the `err` of a result). Anything else is a bug in the
// plugin: its stack is logged through the host at error level and the call
// returns a *retryable* error naming it (JavaScript cannot trap on purpose;
// a Rust or Python plugin traps instead).
function guarded(call, fn) {
  try {
    return fn();
  } catch (e) {
    if (e instanceof PluginError) throw { message: String(e.message), retryable: e.retryable };
    const text = e && e.stack ? e.stack : String(e);
    logAt('error', `${call}: unhandled exception (a bug in the plugin): ${text}`);
    throw { message: `${call}: bug in plugin: ${e && e.message ? e.message : String(e)}`, retryable: true };
  }
}

const ABORTS = new Set(['delete', 'leave']);

/** The WIT export object of a task plugin. `spec` has
 *
 * - `buildResource(ctx)`: the Kubernetes object (a plain object with
 *   apiVersion, kind, metadata, spec) that runs the task; throw a
 *   PluginError to refuse;
 * - `getTaskPhase(ctx, observed)`: a PhaseInfo (from `phase.*`) for the
 *   object as last observed, for *any* object, even a partial one;
 * - `properties` (optional): `{abort: 'delete' | 'leave', deleteOnFinish}`
 *   or a function returning it; the default deletes on abort and keeps the
 *   resource once the task finished.
 *
 * - `warmUp` (optional): `false`, or a task as in task.json (see below).
 *
 * Bind it as `export const k8sTask = definePlugin({...})` in the entry
 * module. The returned object keeps `spec` as `.impl` for unit tests.
 *
 * In the component, once the entry module has been evaluated (at build
 * time, under wizer), the SDK warms the plugin up: it calls properties,
 * buildResource and getTaskPhase a few times on a sample task (`spec.warmUp`
 * when it is an object, else the plugin's task.json, else an empty task),
 * so that the engine's first-run work on those paths (shapes, atoms,
 * compiled regular expressions, the SDK's own paths) is in the snapshot
 * every instance starts from rather than in every call. While it runs,
 * log lines are dropped, the clocks read 0 and state is empty, and
 * whatever the plugin throws is ignored. What the calls leave in module
 * variables is in every instance: pass `warmUp: false` for a plugin that
 * must start each call from its module as evaluated.
 */
export function definePlugin(spec) {
  if (!spec || typeof spec.buildResource !== 'function' || typeof spec.getTaskPhase !== 'function') {
    throw new TypeError('definePlugin needs buildResource(ctx) and getTaskPhase(ctx, observed)');
  }
  const exported = {
    impl: spec,

    properties() {
      served = true;
      const p = (typeof spec.properties === 'function' ? spec.properties() : spec.properties) ?? {};
      const abort = p.abort ?? 'delete';
      if (!ABORTS.has(abort)) throw new TypeError(`properties.abort must be 'delete' or 'leave', not ${abort}`);
      return { abort, deleteOnFinish: Boolean(p.deleteOnFinish) };
    },

    buildResource(ctx) {
      served = true;
      return guarded('build-resource', () => {
        const obj = spec.buildResource(TaskContext.fromWit(ctx));
        if (typeof obj === 'string') return obj; // already serialized
        if (!isObject(obj)) throw new TypeError('buildResource must return a plain object');
        return JSON.stringify(obj);
      });
    },

    getTaskPhase(ctx, observed) {
      served = true;
      return guarded('get-task-phase', () => {
        let obj;
        try {
          obj = JSON.parse(observed);
        } catch (e) {
          throw PluginError.permanent(`the observed resource is not JSON: ${e.message}`);
        }
        const info = spec.getTaskPhase(TaskContext.fromWit(ctx), isObject(obj) ? obj : {});
        if (!(info instanceof PhaseInfo)) throw new TypeError('getTaskPhase must return a PhaseInfo (use phase.*)');
        if (info.outputs != null && !isObject(info.outputs)) {
          throw new TypeError('PhaseInfo outputs must be a plain object (a JSON object)');
        }
        return {
          phase: info.phase,
          reason: info.reason ?? undefined,
          message: info.message ?? undefined,
          outputs: info.outputs == null ? undefined : JSON.stringify(info.outputs),
          logLinks: info.logLinks.map((l) => ({ name: l.name, uri: l.uri })),
        };
      });
    },
  };
  if (inComponent && spec.warmUp !== false) {
    const task = isObject(spec.warmUp) ? spec.warmUp : sampleTask;
    // After the whole entry module has run (wizer runs pending jobs before
    // it snapshots), so the plugin's own top-level bindings exist.
    Promise.resolve().then(() => warmUp(exported, isObject(task) ? task : {}));
  }
  return exported;
}

// ---------------------------------------------------------------------------
// The build-time warm-up
// ---------------------------------------------------------------------------

// Rounds of calls: enough for every path of a call to have run more than
// once, as it has on an instance that served a few calls.
const WARM_UP_ROUNDS = 4;

// Set by every call of an export: a warm-up that did not run at build time
// never runs later, inside an instance serving calls.
let served = false;

const WARM_UP_OBSERVED = JSON.stringify({
  apiVersion: 'v1',
  kind: 'Warmup',
  metadata: { name: 'warm-up-task-0', namespace: 'default', labels: {} },
  status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
});

// Calls the export as the host would, with a WIT-shaped context built from
// `task` (a sample from the plugin's sources, never data of a real call).
function warmUp(exported, task) {
  if (served) return;
  const text = (v, dflt) => (typeof v === 'string' && v !== '' ? v : dflt);
  const json = (v) => JSON.stringify(isObject(v) ? v : {});
  const ctx = {
    workflow: text(task.workflow, 'warm-up'),
    namespace: text(task.namespace, 'default'),
    nodeId: text(task.nodeId, 'task'),
    attempt: 0,
    taskType: text(task.taskType, ''),
    config: json(task.config),
    inputs: json(task.inputs),
    resourceName: 'warm-up-task-0',
    labels: [['weft.dev/workflow', 'warm-up'], ['weft.dev/node', 'task']],
    pluginConfig: '{}',
  };
  warming = true;
  try {
    for (let i = 0; i < WARM_UP_ROUNDS; i++) {
      for (const call of [
        () => exported.properties(),
        () => exported.buildResource(ctx),
        () => exported.getTaskPhase(ctx, WARM_UP_OBSERVED),
      ]) {
        try {
          call();
        } catch {
          // A warm-up call may fail (a sample without the config it needs).
        }
      }
    }
  } finally {
    warming = false;
  }
}
