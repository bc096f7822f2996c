// Sub-workflows drawn inside their parent's graph. An expanded sub-workflow
// (or dynamic) node becomes a group: its header is the node's box, its body
// the child Workflow's own DAG. Each level is laid out on its own (dagre or
// the layered engine, by size), inner levels first, so a group enters its
// parent's layout as one box of the inner graph's size: the compound
// layout of ELK's hierarchy handling, one level at a time, with edges that
// never cross a group's border (a sub-workflow's nodes depend only on one
// another).
//
// Node ids are letters, digits and '-' (the DAG compiler refuses others),
// so a node inside a group is named by the path of node ids from the top,
// joined with '/': `inner/step` is node `step` of the child of `inner`.
// Pure: unit-tested in nested.test.ts. The layout itself is in
// nestedLayout.ts, which pulls in the engines (dagre): the worker's side.
import { dagEdges, type DagNodeLike } from "./model";
import { NODE_H, NODE_W } from "./sizes";
import type { Box, Layout, LayoutEdgeIn, LayoutNodeIn } from "./types";

export const PATH_SEP = "/";

/** The path of node `id` in the group at `prefix` ("" for the top level). */
export function joinPath(prefix: string, id: string): string {
  return prefix === "" ? id : `${prefix}${PATH_SEP}${id}`;
}

/** Parses the `expand` URL parameter: comma-separated node paths. */
export function parseExpand(value: string | null): string[] {
  if (!value) return [];
  const out: string[] = [];
  for (const p of value.split(",")) {
    const path = p.trim();
    if (path !== "" && !out.includes(path)) out.push(path);
  }
  return out;
}

/** Adds `path` to the expanded paths, or removes it with the paths inside it. */
export function toggleExpand(expanded: readonly string[], path: string, open?: boolean): string[] {
  const isOpen = expanded.includes(path);
  const want = open ?? !isOpen;
  if (want === isOpen) return [...expanded];
  if (want) return [...expanded, path];
  const inside = `${path}${PATH_SEP}`;
  return expanded.filter((p) => p !== path && !p.startsWith(inside));
}

/** What a level of the graph needs of a node. */
export interface LevelNode extends DagNodeLike {
  resource?: { kind: string; name: string };
}

/** Whether a node runs a child Workflow that can be drawn in place. */
export function childWorkflowOf(n: LevelNode): string | null {
  return n.resource?.kind === "Workflow" && n.resource.name !== "" ? n.resource.name : null;
}

/** One level of the drawn graph: its nodes and the groups among them. */
export interface GraphLevel<N extends LevelNode = LevelNode> {
  /** "" at the top; the group's path inside one. */
  prefix: string;
  /** The Workflow these nodes belong to. */
  workflow: string;
  nodes: readonly N[];
  /** Expanded sub-workflow nodes whose child is known, by node id. */
  groups: ReadonlyMap<string, GraphLevel<N>>;
}

/**
 * The graph to draw: `nodes` of `workflow`, with every expanded
 * sub-workflow node whose child Workflow's nodes are in `children` (by
 * child name) opened into a group, at any depth. A child that names an
 * ancestor again (it cannot, but a bad status should not hang the page)
 * stays closed.
 */
export function buildLevel<N extends LevelNode>(
  workflow: string,
  nodes: readonly N[],
  expanded: ReadonlySet<string>,
  children: ReadonlyMap<string, readonly N[]>,
  prefix = "",
  seen: ReadonlySet<string> = new Set([workflow]),
): GraphLevel<N> {
  const groups = new Map<string, GraphLevel<N>>();
  for (const n of nodes) {
    const path = joinPath(prefix, n.id);
    const child = childWorkflowOf(n);
    if (!child || !expanded.has(path) || seen.has(child)) continue;
    const inner = children.get(child);
    if (!inner) continue;
    groups.set(n.id, buildLevel(child, inner, expanded, children, path, new Set([...seen, child])));
  }
  return { prefix, workflow, nodes, groups };
}

/**
 * The child Workflows to fetch and watch: those of expanded sub-workflow
 * nodes at every level already drawn (a child's own expanded nodes are
 * found once the child's nodes are known), in a stable order.
 */
export function childrenToWatch(level: GraphLevel, expanded: ReadonlySet<string>): string[] {
  const out: string[] = [];
  const walk = (l: GraphLevel) => {
    for (const n of l.nodes) {
      const child = childWorkflowOf(n);
      if (child && expanded.has(joinPath(l.prefix, n.id)) && !out.includes(child)) out.push(child);
      const g = l.groups.get(n.id);
      if (g) walk(g);
    }
  };
  walk(level);
  return out;
}

/** Every node of every level with its path and Workflow, parents before their groups' nodes. */
export function* walkLevel<N extends LevelNode>(
  level: GraphLevel<N>,
): Generator<{ path: string; node: N; level: GraphLevel<N> }> {
  for (const n of level.nodes) {
    yield { path: joinPath(level.prefix, n.id), node: n, level };
    const g = level.groups.get(n.id);
    if (g) yield* walkLevel(g);
  }
}

/** A level's layout input, groups inside. */
export interface NestedInput {
  nodes: LayoutNodeIn[];
  edges: LayoutEdgeIn[];
  /** Inner graphs, by the id of their group's node at this level. */
  groups: Record<string, NestedInput>;
}

/** A level's layout; each group's inner layout is in its own coordinates. */
export interface NestedLayout extends Layout {
  groups: Map<string, GroupLayout>;
}

export interface GroupLayout {
  /** Where the inner graph's origin is inside the group's box. */
  dx: number;
  dy: number;
  inner: NestedLayout;
}

/** Size of a box that is not a group, by its path. */
export type PathSize = (path: string) => { width: number; height: number };

export function nestedInput(level: GraphLevel, sizeOf: PathSize): NestedInput {
  const groups: Record<string, NestedInput> = {};
  for (const [id, g] of level.groups) groups[id] = nestedInput(g, sizeOf);
  return {
    // Groups get their size from their inner layout (nestedLayout).
    nodes: level.nodes.map((n) =>
      level.groups.has(n.id) ? { id: n.id, width: NODE_W, height: NODE_H } : { id: n.id, ...sizeOf(joinPath(level.prefix, n.id)) },
    ),
    edges: dagEdges(level.nodes),
    groups,
  };
}

/** Changes exactly when the layout of some level would (see structureKey). */
export function nestedKey(input: NestedInput): string {
  const parts: string[] = [];
  for (const n of input.nodes) parts.push(`${n.id}\u0001${n.width}x${n.height}`);
  parts.push("\u0002");
  for (const e of input.edges) parts.push(`${e.from}\u0001${e.to}`);
  for (const id of Object.keys(input.groups).sort()) parts.push(`\u0003${id}\u0004${nestedKey(input.groups[id])}\u0005`);
  return parts.join("\u0000");
}

/**
 * Every box in page coordinates, by path, for arrow keys and scrolling a
 * box into view. A group counts as its header: arrows move between the
 * header and the nodes inside as between any boxes.
 */
export function flatBoxes(layout: NestedLayout, prefix = "", ox = 0, oy = 0, out = new Map<string, Box>()): Map<string, Box> {
  for (const [id, b] of layout.boxes) {
    const g = layout.groups.get(id);
    out.set(joinPath(prefix, id), { x: b.x + ox, y: b.y + oy, width: b.width, height: g ? NODE_H : b.height });
    if (g) flatBoxes(g.inner, joinPath(prefix, id), b.x + ox + g.dx, b.y + oy + g.dy, out);
  }
  return out;
}
