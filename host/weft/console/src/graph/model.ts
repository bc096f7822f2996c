// From the API's nodes to the layout's input: the DAG's edges come from
// each node's depends_on. Pure: unit-tested in graph.test.ts.
import type { LayoutEdgeIn, LayoutInput } from "./types";

export interface DagNodeLike {
  id: string;
  dependsOn: readonly string[];
}

/**
 * The edges dependency -> dependent. Dependencies on ids that are not in
 * `nodes` (e.g. a node of the main DAG named by an exit handler), self
 * loops and repeats are dropped, so every edge joins two drawn boxes.
 */
export function dagEdges(nodes: readonly DagNodeLike[]): LayoutEdgeIn[] {
  const ids = new Set(nodes.map((n) => n.id));
  const seen = new Set<string>();
  const edges: LayoutEdgeIn[] = [];
  for (const n of nodes) {
    for (const d of n.dependsOn) {
      if (d === n.id || !ids.has(d)) continue;
      const key = `${d}\u0000${n.id}`;
      if (seen.has(key)) continue;
      seen.add(key);
      edges.push({ from: d, to: n.id });
    }
  }
  return edges;
}

export type SizeOf = (id: string) => { width: number; height: number };

export function layoutInput(nodes: readonly DagNodeLike[], sizeOf: SizeOf): LayoutInput {
  return {
    nodes: nodes.map((n) => ({ id: n.id, ...sizeOf(n.id) })),
    edges: dagEdges(nodes),
  };
}

/**
 * A string that changes exactly when the layout would: the node set, the
 * edges or a box size. Live updates that only change phases keep the key,
 * so the layout is reused and only colours and labels are redrawn.
 */
export function structureKey(input: LayoutInput): string {
  const parts: string[] = [];
  for (const n of input.nodes) parts.push(`${n.id}\u0001${n.width}x${n.height}`);
  parts.push("\u0002");
  for (const e of input.edges) parts.push(`${e.from}\u0001${e.to}`);
  return parts.join("\u0000");
}
