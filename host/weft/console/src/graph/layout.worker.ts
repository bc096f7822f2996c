// Lays graphs out off the main thread so the page stays interactive while
// a large workflow is first drawn or its structure changes.
import type { NestedInput } from "./nested";
import { nestedLayout } from "./nestedLayout";

interface Req {
  seq: number;
  input: NestedInput;
}

self.onmessage = (ev: MessageEvent<Req>) => {
  const { seq, input } = ev.data;
  try {
    (self as unknown as Worker).postMessage({ seq, layout: nestedLayout(input) });
  } catch (e) {
    (self as unknown as Worker).postMessage({ seq, error: String(e) });
  }
};
