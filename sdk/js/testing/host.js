// Stand-ins for the host's imports, for native unit tests: log lines go to
// stderr (set WEFT_LOG=off to silence them), the clocks are the system's
// and state is an in-memory Map of this process. Tests may read `logged`.
import process from 'node:process';

/** Every line logged, as [level, message]. */
export const logged = [];

export function log(level, message) {
  logged.push([level, message]);
  if (process.env.WEFT_LOG !== 'off') process.stderr.write(`[${level}] ${message}\n`);
}

export function nowMillis() {
  return BigInt(Date.now());
}

export function monotonicNanos() {
  return process.hrtime.bigint();
}

const store = new Map();

export function get(key) {
  const hit = store.get(key);
  if (!hit) return undefined;
  if (hit.expires !== undefined && Date.now() >= hit.expires) {
    store.delete(key);
    return undefined;
  }
  return hit.value;
}

export function set(key, value, ttlMillis) {
  store.set(key, {
    value: Uint8Array.from(value),
    expires: ttlMillis === undefined ? undefined : Date.now() + Number(ttlMillis),
  });
}

function remove(key) {
  store.delete(key);
}
export { remove as delete };
