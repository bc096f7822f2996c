// The main thread's side of the layout worker: one shared worker, requests
// answered by sequence number. Falls back to laying out inline when a
// worker cannot start.
import type { NestedInput, NestedLayout } from "./nested";

type Pending = { resolve: (l: NestedLayout) => void; reject: (e: Error) => void; input: NestedInput };

let worker: Worker | null | undefined;
let seq = 0;
const pending = new Map<number, Pending>();

function getWorker(): Worker | null {
  if (worker !== undefined) return worker;
  try {
    worker = new Worker(new URL("./layout.worker.ts", import.meta.url), { type: "module" });
    worker.onmessage = (ev: MessageEvent<{ seq: number; layout?: NestedLayout; error?: string }>) => {
      const p = pending.get(ev.data.seq);
      if (!p) return;
      pending.delete(ev.data.seq);
      if (ev.data.layout) p.resolve(ev.data.layout);
      else p.reject(new Error(ev.data.error ?? "layout failed"));
    };
    worker.onerror = () => {
      // The worker script could not load: lay the waiting graphs out here.
      worker?.terminate();
      worker = null;
      for (const [k, p] of pending) {
        pending.delete(k);
        runInline(p);
      }
    };
  } catch {
    worker = null;
  }
  return worker;
}

// Loaded on demand: the engines (dagre) stay out of the main bundle.
function runInline(p: Pending): void {
  import("./nestedLayout")
    .then(({ nestedLayout }) => p.resolve(nestedLayout(p.input)))
    .catch((e: unknown) => p.reject(e instanceof Error ? e : new Error(String(e))));
}

export function layoutAsync(input: NestedInput): Promise<NestedLayout> {
  return new Promise((resolve, reject) => {
    const p = { resolve, reject, input };
    const w = typeof Worker === "undefined" ? null : getWorker();
    if (!w) {
      runInline(p);
      return;
    }
    const id = ++seq;
    pending.set(id, p);
    w.postMessage({ seq: id, input });
  });
}
