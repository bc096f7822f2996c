// dagre for small graphs: its network-simplex ranking and dummy-node edge
// routing look best, and up to a few hundred nodes it is fast enough (see
// layered.ts for the measurements that set the limits in layout.ts).
import dagre from "@dagrejs/dagre";
import { smoothPath } from "./paths";
import type { Box, LaidEdge, Layout, LayoutInput } from "./types";

const MARGIN = 16;

export function dagreLayout(input: LayoutInput): Layout {
  const g = new dagre.graphlib.Graph({ multigraph: false });
  g.setGraph({ rankdir: "TB", nodesep: 24, ranksep: 48, marginx: MARGIN, marginy: MARGIN });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of input.nodes) g.setNode(n.id, { width: n.width, height: n.height });
  for (const e of input.edges) g.setEdge(e.from, e.to);
  dagre.layout(g);

  const boxes = new Map<string, Box>();
  for (const n of input.nodes) {
    const l = g.node(n.id);
    // dagre gives centres; the view wants top-left corners.
    boxes.set(n.id, { x: (l.x ?? 0) - n.width / 2, y: (l.y ?? 0) - n.height / 2, width: n.width, height: n.height });
  }
  const edges: LaidEdge[] = input.edges.map((e) => ({
    from: e.from,
    to: e.to,
    path: smoothPath(g.edge(e.from, e.to)?.points ?? []),
  }));
  const graph = g.graph();
  return {
    boxes,
    edges,
    width: graph.width ?? 0,
    height: graph.height ?? 0,
    engine: "dagre",
  };
}
