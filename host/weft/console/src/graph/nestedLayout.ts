// The layout of a graph with open groups (see nested.ts): inner levels
// first, each group entering its parent's layout as one box of its inner
// graph's size. Runs in the layout worker (it pulls in dagre).
import { computeLayout } from "./layout";
import type { GroupLayout, NestedInput, NestedLayout } from "./nested";
import { NODE_H, NODE_W } from "./sizes";
import type { Layout, LayoutEdgeIn, LayoutNodeIn } from "./types";

/**
 * A group's box for an inner layout of `inner`'s size: the header above
 * it (the inner layout's own margin borders it on every side).
 */
export function groupSize(inner: { width: number; height: number }): { width: number; height: number } {
  return { width: Math.max(NODE_W, inner.width), height: NODE_H + inner.height };
}

/** Lays out the inner levels first, then this one with each group at its inner graph's size. */
export function nestedLayout(input: NestedInput, layout: (i: { nodes: LayoutNodeIn[]; edges: LayoutEdgeIn[] }) => Layout = computeLayout): NestedLayout {
  const inner = new Map<string, NestedLayout>();
  for (const [id, g] of Object.entries(input.groups)) inner.set(id, nestedLayout(g, layout));
  const nodes = input.nodes.map((n) => {
    const g = inner.get(n.id);
    return g ? { id: n.id, ...groupSize(g) } : n;
  });
  const l = layout({ nodes, edges: input.edges });
  const groups = new Map<string, GroupLayout>();
  for (const [id, g] of inner) {
    const box = l.boxes.get(id);
    if (!box) continue;
    groups.set(id, { dx: (box.width - g.width) / 2, dy: NODE_H, inner: g });
  }
  return { ...l, groups };
}

