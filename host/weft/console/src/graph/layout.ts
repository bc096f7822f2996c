// Picks the layout engine by graph size. Runs in the layout worker, and on
// the main thread where workers are not available (unit tests).
import { dagreLayout } from "./dagreLayout";
import { layeredLayout } from "./layered";
import type { Layout, LayoutInput } from "./types";

/** Above either limit dagre can take seconds (measured; see layered.ts). */
export const DAGRE_MAX_NODES = 150;
export const DAGRE_MAX_EDGES = 300;

export function chooseEngine(input: LayoutInput): Layout["engine"] {
  return input.nodes.length <= DAGRE_MAX_NODES && input.edges.length <= DAGRE_MAX_EDGES
    ? "dagre"
    : "layered";
}

export function computeLayout(input: LayoutInput): Layout {
  return chooseEngine(input) === "dagre" ? dagreLayout(input) : layeredLayout(input);
}
