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
// camel-cased). A web-API task plugin (the `webapi-task-plugin` world of
// `weft:plugin@0.2.0`: a task run as a job of a remote service) exports
// `webapiTask = defineWebApiPlugin({create, get, delete})` instead and talks
// to the service with `http` (see the end of this file). The host's imports are wrapped in `log`, `clock` and
// `state` below. Natively (node --test with testing/register.js) the same
// code runs against stand-ins: see testing/host.js.

import { log as hostLog } from 'weft:plugin/log@0.1.0';
import * as hostClock from 'weft:plugin/clock@0.1.0';
import * as hostState from 'weft:plugin/state@0.1.0';
// What build.sh knows: whether this is the component (false under the native
// test hooks) and the plugin's task.json (or null), for the warm-up.
import { inComponent, sampleTask } from 'weft-plugin-sdk/build';
// The world's wasi:http imports in a webapi-task-plugin component (bundle.mjs
// generates this module; `available` is false in the other worlds and natively).
import * as wasiHttp from 'weft-plugin-sdk/wasi-http';

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

// QuickJS (the default engine, see build.sh) has no console: in the component its
// calls become host log lines, so a plugin's console.log neither throws nor
// goes missing. (SpiderMonkey's writes stdout, which the host forwards.)
if (inComponent && typeof globalThis.console === 'undefined') {
  const show = (v) => {
    if (typeof v === 'string') return v;
    try {
      return JSON.stringify(v) ?? String(v);
    } catch {
      return String(v);
    }
  };
  const at = (level) => (...args) => logAt(level, args.map(show).join(' '));
  globalThis.console = {
    log: at('info'),
    info: at('info'),
    debug: at('debug'),
    trace: at('trace'),
    warn: at('warn'),
    error: at('error'),
  };
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

// UTF-8 both ways. QuickJS has no TextEncoder or TextDecoder (SpiderMonkey
// and Node do): in the component the SDK puts minimal ones (UTF-8 only, no
// streaming) in their place, for itself and for plugin code.
if (inComponent && typeof globalThis.TextEncoder === 'undefined') {
  globalThis.TextEncoder = class TextEncoder {
    get encoding() {
      return 'utf-8';
    }
    encode(text = '') {
      return utf8Encode(text);
    }
  };
  globalThis.TextDecoder = class TextDecoder {
    get encoding() {
      return 'utf-8';
    }
    decode(bytes) {
      return utf8Decode(bytes);
    }
  };
}
const encoder = new TextEncoder();
const decoder = new TextDecoder();

function utf8Encode(text) {
  const s = String(text);
  const out = [];
  for (let i = 0; i < s.length; i++) {
    let c = s.codePointAt(i);
    if (c > 0xffff) i++; // the low half of a surrogate pair
    else if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd; // a lone surrogate
    if (c < 0x80) out.push(c);
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
  }
  return Uint8Array.from(out);
}

// Malformed sequences become U+FFFD, as TextDecoder's default does.
function utf8Decode(bytes) {
  const b =
    bytes == null
      ? new Uint8Array()
      : bytes instanceof ArrayBuffer
        ? new Uint8Array(bytes)
        : ArrayBuffer.isView(bytes)
          ? new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)
          : bytes;
  let s = '';
  for (let i = 0; i < b.length; ) {
    const c = b[i];
    const n = c < 0x80 ? 0 : c >= 0xf5 ? -1 : c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc2 ? 1 : -1;
    let cp = n === 0 ? c : n === 1 ? c & 31 : n === 2 ? c & 15 : c & 7;
    let ok = n >= 0 && i + n < b.length;
    for (let k = 1; ok && k <= n; k++) {
      if ((b[i + k] & 0xc0) !== 0x80) ok = false;
      else cp = (cp << 6) | (b[i + k] & 63);
    }
    const min = [0, 0x80, 0x800, 0x10000][n];
    if (!ok || cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      s += '\ufffd';
      i += 1;
    } else {
      s += String.fromCodePoint(cp);
      i += n + 1;
    }
  }
  return s;
}

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
// Artifacts in a resource's pods
// ---------------------------------------------------------------------------

/** The annotation listing an object's pod specs for the host to wrap with
 * the task's artifacts: a JSON array of JSON Pointers (RFC 6901). */
export const POD_SPECS_ANNOTATION = 'weft.dev/pod-specs';

/** Marks the pod specs of `obj` (a Job's `/spec/template/spec`, a
 * PyTorchJob's replicas) so that the host moves the task's artifacts in
 * their pods as in a Pod task: an init container fetches the inputs and
 * the main container's `command` runs under `weft io exec`, which uploads
 * the outputs. The first pod spec reports the outputs; the others get the
 * inputs. Each must be an object with containers; throws a permanent
 * PluginError naming the pointer otherwise. Returns `obj`. */
export function markPodSpecs(obj, pointers) {
  if (!Array.isArray(pointers) || pointers.length === 0) {
    throw PluginError.permanent('markPodSpecs: no pod spec given (pass at least one JSON Pointer)');
  }
  for (const p of pointers) {
    const spec = typeof p === 'string' ? pointerAt(obj, p) : undefined;
    const containers = dig(spec, 'containers');
    if (!Array.isArray(containers) || containers.length === 0) {
      const why = spec === undefined ? 'nothing there (a JSON Pointer starts with /)' : 'not a pod spec (no containers)';
      throw PluginError.permanent(`${p}: ${why}`);
    }
  }
  if (!isObject(obj)) throw PluginError.permanent('markPodSpecs: the resource is not an object');
  if (!isObject(obj.metadata)) obj.metadata = {};
  if (!isObject(obj.metadata.annotations)) obj.metadata.annotations = {};
  obj.metadata.annotations[POD_SPECS_ANNOTATION] = JSON.stringify(pointers);
  return obj;
}

function pointerAt(obj, pointer) {
  if (!pointer.startsWith('/')) return undefined;
  let cur = obj;
  for (const raw of pointer.slice(1).split('/')) {
    const step = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    cur = Array.isArray(cur) && /^\d+$/.test(step) ? dig(cur, Number(step)) : dig(cur, step);
    if (cur === undefined) return undefined;
  }
  return cur;
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
    throw witError(call, e);
  }
}

// The same for a call that may answer a promise (a web-API plugin's async
// create / get / delete, awaiting fetch): `finish` checks and converts the
// answer. ComponentizeJS waits for a promise, and a rejection is the err.
function guardedMaybeAsync(call, fn, finish) {
  let answer;
  try {
    answer = fn();
    if (!(answer && typeof answer.then === 'function')) return finish(answer);
  } catch (e) {
    throw witError(call, e);
  }
  return Promise.resolve(answer)
    .then(finish)
    .catch((e) => {
      throw witError(call, e);
    });
}

// A PhaseInfo as the WIT record.
function witPhaseInfo(call, info) {
  if (!(info instanceof PhaseInfo)) throw new TypeError(`${call} must return a PhaseInfo (use phase.*)`);
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
}

// The WIT error for what a call threw (see guarded).
function witError(call, e) {
  if (e instanceof PluginError) return { message: String(e.message), retryable: e.retryable };
  const text = e && e.stack ? e.stack : String(e);
  logAt('error', `${call}: unhandled exception (a bug in the plugin): ${text}`);
  return { message: `${call}: bug in plugin: ${e && e.message ? e.message : String(e)}`, retryable: true };
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
        return witPhaseInfo('getTaskPhase', spec.getTaskPhase(TaskContext.fromWit(ctx), isObject(obj) ? obj : {}));
      });
    },
  };
  if (inComponent && spec.warmUp !== false) {
    const task = isObject(spec.warmUp) ? spec.warmUp : sampleTask;
    pendingWarmUps.push(() => warmUp(exported, isObject(task) ? task : {}));
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

// The warm-ups of the plugin's exports, run once the whole entry module has
// run (so the plugin's own top-level bindings exist): bundle.mjs ends the
// bundle with a call of `runWarmUps` through this global. Not a promise
// job: QuickJS's pre-initialiser snapshots without running pending jobs.
// (A web-API warm-up awaits; SpiderMonkey's wizer drains its job queue.)
const pendingWarmUps = [];
const WARM_UP_HOOK = Symbol.for('weft-plugin-sdk.warm-up');

function runWarmUps() {
  delete globalThis[WARM_UP_HOOK];
  for (const run of pendingWarmUps.splice(0)) run();
}

if (inComponent) globalThis[WARM_UP_HOOK] = runWarmUps;

const WARM_UP_OBSERVED = JSON.stringify({
  apiVersion: 'v1',
  kind: 'Warmup',
  metadata: { name: 'warm-up-task-0', namespace: 'default', labels: {} },
  status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
});

// A WIT-shaped context from a sample task.
function warmUpContext(task) {
  const text = (v, dflt) => (typeof v === 'string' && v !== '' ? v : dflt);
  const json = (v) => JSON.stringify(isObject(v) ? v : {});
  return {
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
}

// Calls the export as the host would, with a WIT-shaped context built from
// `task` (a sample from the plugin's sources, never data of a real call).
function warmUp(exported, task) {
  if (served) return;
  const ctx = warmUpContext(task);
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

// ---------------------------------------------------------------------------
// Web-API task plugins (webapi-task-plugin, weft:plugin@0.2.0)
// ---------------------------------------------------------------------------

/** A request that got no response (or whose response was refused): a
 * PluginError, retryable for transport failures (connection refused, DNS,
 * a reset, a timeout), permanent for a request the host refused (not in
 * the egress allow-list, over the response cap) or an invalid one. `url`
 * is the request's URL, `code` the wasi:http error code. */
export class HttpError extends PluginError {
  constructor(message, retryable, url = '', code = '') {
    super(message, retryable);
    this.name = 'HttpError';
    this.url = url;
    /** The wasi:http error-code case (`HTTP-request-denied`,
     * `connection-refused`, ...), or what else failed. */
    this.code = code;
  }
}

/** An HTTP response, read whole: `status`, `headers` (an object, lower-case
 * names), `body` (a Uint8Array), `url`. */
export class HttpResponse {
  constructor(status, headers = {}, body = new Uint8Array(), url = '') {
    this.status = status;
    this.headers = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), String(v)]));
    this.body = typeof body === 'string' ? encoder.encode(body) : body;
    this.url = url;
  }
  /** Whether the status is 2xx. */
  get ok() {
    return this.status >= 200 && this.status < 300;
  }
  /** The body as UTF-8 text. */
  text() {
    return decoder.decode(this.body);
  }
  /** The body parsed as JSON; a retryable PluginError when it is not JSON. */
  json() {
    try {
      return JSON.parse(this.text());
    } catch (e) {
      throw PluginError.retryable(
        `${this.url || 'the response'} answered ${this.status} with a body that is not JSON: ${e.message}: ${JSON.stringify(this.text().slice(0, 200))}`,
      );
    }
  }
  /** Itself when 2xx; else a PluginError naming the URL and the status:
   * retryable for 5xx, 408 and 429, permanent for other 4xx. */
  raiseForStatus() {
    if (this.ok) return this;
    const retryable = this.status >= 500 || this.status === 408 || this.status === 429;
    throw new PluginError(`${this.url} answered ${this.status}: ${this.text().slice(0, 500)}`, retryable);
  }
}

let responder = null;

// Error codes a new attempt may not meet again: the request itself is wrong,
// or the host refused it (its allow-list, its response cap). Lower-cased
// wasi:http error-code cases.
const PERMANENT_CODES = new Set([
  'http-request-denied', 'http-request-uri-invalid', 'http-request-uri-too-long',
  'http-request-method-invalid', 'http-request-header-section-size', 'http-request-header-size',
  'http-request-body-size', 'http-response-body-size', 'configuration-error',
  'destination-ip-prohibited',
]);

function httpFailure(method, url, code) {
  const tag = String(code && code.tag ? code.tag : 'internal-error');
  if (tag.toLowerCase() === 'http-request-denied') {
    return new HttpError(`${method} ${url}: denied by the host (not in the plugin's egress allow-list)`, false, url, tag);
  }
  const detail = code && code.val != null ? ` (${typeof code.val === 'object' ? JSON.stringify(code.val, (k, v) => (typeof v === 'bigint' ? String(v) : v)) : code.val})` : '';
  return new HttpError(`${method} ${url}: ${tag}${detail}`, !PERMANENT_CODES.has(tag.toLowerCase()), url, tag);
}

const METHODS = new Set(['get', 'head', 'post', 'put', 'delete', 'connect', 'options', 'trace', 'patch']);
// A write to a wasi:io output stream may carry at most 4096 bytes.
const WRITE_CHUNK = 4096;
const READ_CHUNK = 65536n;

const dispose = (resource) => resource[Symbol.dispose]();

// One request over the world's wasi:http/outgoing-handler, blocking until the
// whole response is read. Resources are dropped children first, as wasi:http
// requires.
function sendWasi(method, url, headers, body) {
  const { Fields, OutgoingBody, OutgoingRequest, handle } = wasiHttp;
  const u = new URL(url);
  let fields;
  try {
    fields = Fields.fromList(Object.entries(headers).map(([k, v]) => [k, encoder.encode(String(v))]));
  } catch (e) {
    throw new HttpError(`${method} ${url}: a header the host does not allow (${JSON.stringify(e.payload ?? String(e))})`, false, url, 'header-error');
  }
  const req = new OutgoingRequest(fields);
  const m = method.toLowerCase();
  req.setMethod(METHODS.has(m) ? { tag: m } : { tag: 'other', val: method });
  req.setScheme({ tag: u.protocol === 'https:' ? 'HTTPS' : 'HTTP' });
  req.setAuthority(u.host);
  req.setPathWithQuery(`${u.pathname || '/'}${u.search}`);
  const out = req.body();
  let future;
  try {
    future = handle(req, undefined);
  } catch (e) {
    throw httpFailure(method, url, e.payload);
  }
  try {
    const stream = out.write();
    try {
      for (let i = 0; i < body.length; i += WRITE_CHUNK) {
        stream.blockingWriteAndFlush(body.subarray(i, i + WRITE_CHUNK));
      }
    } finally {
      dispose(stream);
    }
    OutgoingBody.finish(out, undefined);
  } catch {
    // The host stopped reading: the response (or its error) says why.
  }
  const ready = future.subscribe();
  ready.block();
  dispose(ready);
  const got = future.get();
  dispose(future);
  // got: {tag: 'ok', val: {tag: 'ok', val: response} | {tag: 'err', val: error-code}}
  if (!got || got.tag !== 'ok' || got.val.tag !== 'ok') {
    throw httpFailure(method, url, got && got.tag === 'ok' ? got.val.val : undefined);
  }
  const resp = got.val.val;
  try {
    const status = resp.status();
    const fieldsIn = resp.headers();
    const out = {};
    for (const [k, v] of fieldsIn.entries()) {
      const name = k.toLowerCase();
      const text = decoder.decode(v);
      out[name] = name in out ? `${out[name]}, ${text}` : text;
    }
    dispose(fieldsIn);
    const incoming = resp.consume();
    const stream = incoming.stream();
    const chunks = [];
    let size = 0;
    try {
      for (;;) {
        let chunk;
        try {
          chunk = stream.blockingRead(READ_CHUNK);
        } catch (e) {
          if (e.payload && e.payload.tag === 'closed') break;
          // The body broke off (a reset, the host's size cap).
          throw new HttpError(`${method} ${url}: the response body broke off`, true, url, 'body-error');
        }
        chunks.push(chunk);
        size += chunk.length;
      }
    } finally {
      dispose(stream);
      dispose(incoming);
    }
    const data = new Uint8Array(size);
    let at = 0;
    for (const c of chunks) {
      data.set(c, at);
      at += c.length;
    }
    return new HttpResponse(status, out, data, url);
  } finally {
    dispose(resp);
  }
}

function send(method, url, headers, body) {
  if (!/^https?:\/\/[^/]/i.test(url)) {
    throw new HttpError(`${method} ${url}: not an http:// or https:// URL`, false, url, 'HTTP-request-URI-invalid');
  }
  if (wasiHttp.available) return sendWasi(method, url, headers, body);
  if (!responder) {
    throw new HttpError(
      `${method} ${url}: no network here (natively, answer requests with http.setResponder(fn); ` +
        'in a component, build the webapi-task-plugin world)',
      false,
      url,
      'no-network',
    );
  }
  const r = responder({ method, url, headers, body, json: () => JSON.parse(decoder.decode(body)) });
  if (!(r instanceof HttpResponse)) throw new TypeError('the responder must return an HttpResponse');
  r.url = r.url || url;
  return r;
}

/** A small blocking HTTP client for web-API plugins, on the world's
 * `wasi:http/outgoing-handler`: the host checks every request against the
 * manifest's `egress.allow` (narrowed by the operator) before it connects,
 * adds credential headers itself and caps the response's size and time.
 * Every function answers an HttpResponse, synchronously:
 *
 *   const resp = http.post(`${url}/jobs`, { json: { id: key } });
 *   const job = resp.raiseForStatus().json();
 *
 * An HTTP error status is not an exception (the plugin decides what a 404
 * means); a request that gets no response throws an HttpError (a
 * PluginError: retryable for transport failures, permanent when the host
 * denied it). During the build-time warm-up no request leaves the build:
 * each is answered 200 with the body `{}`. Natively a function given to
 * `http.setResponder` answers instead of the network. (`fetch` works too,
 * in an async create / get / delete; see the README for its pitfall.) */
export const http = {
  /** One request: `options` has `headers` (an object), and `body` (a
   * string or Uint8Array) or `json` (serialized, with content-type
   * application/json); a content-length is set for any body. Answers an
   * HttpResponse. */
  request(method, url, options = {}) {
    method = String(method).toUpperCase();
    url = String(url);
    const headers = { ...(options.headers ?? {}) };
    let body = options.body;
    if (options.json !== undefined) {
      if (body !== undefined) throw new TypeError('http.request: give body or json, not both');
      body = JSON.stringify(options.json);
      if (!Object.keys(headers).some((k) => k.toLowerCase() === 'content-type')) {
        headers['content-type'] = 'application/json';
      }
    }
    const bytes = body === undefined || body === null ? new Uint8Array() : typeof body === 'string' ? encoder.encode(body) : body;
    // A length, not a chunked body: many servers (Python's http.server,
    // some proxies) do not read chunked requests.
    if ((bytes.length || ['POST', 'PUT', 'PATCH'].includes(method)) &&
        !Object.keys(headers).some((k) => k.toLowerCase() === 'content-length')) {
      headers['content-length'] = String(bytes.length);
    }
    if (warming) return new HttpResponse(200, { 'content-type': 'application/json' }, '{}', url);
    return send(method, url, headers, bytes);
  },
  /** `request('GET', url, {headers})`. */
  get: (url, options) => http.request('GET', url, options),
  /** `request('POST', url, options)`. */
  post: (url, options) => http.request('POST', url, options),
  /** `request('PUT', url, options)`. */
  put: (url, options) => http.request('PUT', url, options),
  /** `request('DELETE', url, options)`. */
  delete: (url, options) => http.request('DELETE', url, options),
  /** Natively, answer every request with `fn(request)` (`{method, url,
   * headers, body: Uint8Array, json()}` → an HttpResponse; throw an
   * HttpError to fail it); `null` removes it. Unit tests play the service
   * with it. No effect in the component. */
  setResponder(fn) {
    responder = fn;
  },
};

/** The WIT export object of a web-API task plugin (Flyte's async agent):
 * bind it as `export const webapiTask = defineWebApiPlugin({...})` in the
 * entry module, whose manifest says `world: webapi-task-plugin`. `spec` has
 *
 * - `create(ctx, idempotencyKey)`: starts the job and answers its *meta*
 *   (a string: a job id, a URL), which the host keeps in the node's status
 *   (at most 4 KiB) and hands to get and delete. The key is the same for
 *   every create of this attempt, across controller restarts: give it to
 *   the service (as the job's id, an `Idempotency-Key` header) so that a
 *   create repeated after a crash finds the job instead of starting another;
 * - `get(ctx, meta)`: a PhaseInfo (from `phase.*`); outputs on success,
 *   log links to the service's UI. A thrown error is about *asking* (the
 *   host polls again when it is retryable); a failed job is a failure phase;
 * - `delete(ctx, meta)`: stops the job; stopping one that already ended is
 *   not an error;
 * - `warmUp` (optional): `false`, or a task as in task.json.
 *
 * Each may be `async` (to await `fetch`; `http` is synchronous). The returned object
 * keeps `spec` as `.impl` for unit tests. At build time the plugin is
 * warmed up as definePlugin's is (create, get and delete on the sample
 * task), with `http` answering every request 200 `{}` and `fetch` stood in
 * for the same way: nothing leaves the build. */
export function defineWebApiPlugin(spec) {
  for (const f of ['create', 'get', 'delete']) {
    if (!spec || typeof spec[f] !== 'function') {
      throw new TypeError('defineWebApiPlugin needs create(ctx, idempotencyKey), get(ctx, meta) and delete(ctx, meta)');
    }
  }
  const exported = {
    impl: spec,

    create(ctx, idempotencyKey) {
      served = true;
      return guardedMaybeAsync(
        'create',
        () => spec.create(TaskContext.fromWit(ctx), idempotencyKey),
        (meta) => {
          if (typeof meta !== 'string') throw new TypeError(`create must answer the meta as a string, not ${typeof meta}`);
          return meta;
        },
      );
    },

    get(ctx, meta) {
      served = true;
      return guardedMaybeAsync('get', () => spec.get(TaskContext.fromWit(ctx), meta), (info) => witPhaseInfo('get', info));
    },

    delete(ctx, meta) {
      served = true;
      return guardedMaybeAsync('delete', () => spec['delete'](TaskContext.fromWit(ctx), meta), () => undefined);
    },
  };
  if (inComponent && spec.warmUp !== false) {
    const task = isObject(spec.warmUp) ? spec.warmUp : sampleTask;
    pendingWarmUps.push(() => warmUpWebApi(exported, isObject(task) ? task : {}));
  }
  return exported;
}

// What `fetch` answers while the web-API warm-up runs: no network at build time.
function warmUpFetch() {
  try {
    return Promise.resolve(new Response('{}', { status: 200, headers: { 'content-type': 'application/json' } }));
  } catch (e) {
    return Promise.reject(new TypeError('no network during the build-time warm-up'));
  }
}

// create, get and delete, WARM_UP_ROUNDS times, as the host would call
// them; every promise settles within the job queue wizer drains before it
// snapshots (http and fetch answer at once while warming).
async function warmUpWebApi(exported, task) {
  if (served) return;
  const ctx = warmUpContext(task);
  const realFetch = globalThis.fetch;
  globalThis.fetch = warmUpFetch;
  warming = true;
  try {
    for (let i = 0; i < WARM_UP_ROUNDS; i++) {
      let meta = 'warm-up-task-0';
      try {
        meta = await exported.create(ctx, 'warm-up-task-0');
      } catch {
        // A warm-up call may fail (a sample without the config it needs).
      }
      for (const call of [() => exported.get(ctx, meta), () => exported['delete'](ctx, meta)]) {
        try {
          await call();
        } catch {
          // As above.
        }
      }
    }
  } finally {
    warming = false;
    globalThis.fetch = realFetch;
  }
}

/** For the SDK's own tests: the UTF-8 fallbacks used where the engine has
 * no TextEncoder / TextDecoder (QuickJS). */
export const _utf8 = { encode: utf8Encode, decode: utf8Decode };
