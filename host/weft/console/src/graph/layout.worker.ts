// Lays graphs out off the main thread so the page stays interactive while
// a large workflow is first drawn or its structure changes.
import { computeLayout } from "./layout";
import type { LayoutInput } from "./types";

interface Req {
  seq: number;
  input: LayoutInput;
}

self.onmessage = (ev: MessageEvent<Req>) => {
  const { seq, input } = ev.data;
  try {
    (self as unknown as Worker).postMessage({ seq, layout: computeLayout(input) });
  } catch (e) {
    (self as unknown as Worker).postMessage({ seq, error: String(e) });
  }
};
