import { describe, expect, it } from "vitest";
import {
  buildLevel,
  childrenToWatch,
  flatBoxes,
  joinPath,
  nestedInput,
  nestedKey,
  parseExpand,
  toggleExpand,
  walkLevel,
  type LevelNode,
} from "./nested";
import { layeredLayout } from "./layered";
import { nestedLayout } from "./nestedLayout";
import { nodeSize, NODE_H, NODE_W } from "./sizes";
import type { Box } from "./types";

const n = (id: string, dependsOn: string[] = [], child?: string): LevelNode => ({
  id,
  dependsOn,
  resource: child ? { kind: "Workflow", name: child } : { kind: "Pod", name: `${id}-pod` },
});

// parent: prepare -> inner (sub-workflow, child "kid") -> after
const parent = [n("prepare"), n("inner", ["prepare"], "kid"), n("after", ["inner"])];
// kid: a diamond, whose `deep` node is itself a sub-workflow (child "grandkid")
const kid = [n("a"), n("b", ["a"]), n("c", ["a"]), n("d", ["b", "c"]), n("deep", ["d"], "grandkid")];
const grandkid = [n("x"), n("y", ["x"])];
const children = new Map([
  ["kid", kid],
  ["grandkid", grandkid],
]);
const fixed = () => nodeSize(false, 0);

const inside = (b: Box, outer: Box) =>
  b.x >= outer.x - 0.01 && b.y >= outer.y - 0.01 && b.x + b.width <= outer.x + outer.width + 0.01 && b.y + b.height <= outer.y + outer.height + 0.01;

describe("paths and the expand parameter", () => {
  it("joins node ids into paths", () => {
    expect(joinPath("", "a")).toBe("a");
    expect(joinPath("inner", "a")).toBe("inner/a");
  });
  it("parses the expand list without blanks or repeats", () => {
    expect(parseExpand(null)).toEqual([]);
    expect(parseExpand("inner, inner/deep,,inner")).toEqual(["inner", "inner/deep"]);
  });
  it("opens and closes; closing a group closes the groups inside it", () => {
    expect(toggleExpand([], "inner")).toEqual(["inner"]);
    expect(toggleExpand(["inner", "inner/deep", "fan", "inner-2"], "inner")).toEqual(["fan", "inner-2"]);
    expect(toggleExpand(["inner"], "inner", true)).toEqual(["inner"]);
    expect(toggleExpand([], "inner", false)).toEqual([]);
  });
});

describe("levels", () => {
  it("opens only expanded sub-workflow nodes whose child is known", () => {
    expect(buildLevel("wf", parent, new Set(), children).groups.size).toBe(0);
    expect(buildLevel("wf", parent, new Set(["inner"]), new Map()).groups.size).toBe(0);
    // An expanded node without a child Workflow (a pod) is no group.
    expect(buildLevel("wf", parent, new Set(["prepare"]), children).groups.size).toBe(0);
    const l = buildLevel("wf", parent, new Set(["inner"]), children);
    const g = l.groups.get("inner")!;
    expect(g).toMatchObject({ prefix: "inner", workflow: "kid" });
    expect(g.nodes.map((x) => x.id)).toEqual(["a", "b", "c", "d", "deep"]);
    expect(g.groups.size).toBe(0);
  });
  it("nests, and names every node by its path", () => {
    const l = buildLevel("wf", parent, new Set(["inner", "inner/deep"]), children);
    expect([...walkLevel(l)].map((w) => `${w.path}@${w.level.workflow}`)).toEqual([
      "prepare@wf",
      "inner@wf",
      "inner/a@kid",
      "inner/b@kid",
      "inner/c@kid",
      "inner/d@kid",
      "inner/deep@kid",
      "inner/deep/x@grandkid",
      "inner/deep/y@grandkid",
      "after@wf",
    ]);
  });
  it("does not open a child that names an ancestor again", () => {
    const loop = new Map([["kid", [n("back", [], "wf")]]]);
    const l = buildLevel("wf", parent, new Set(["inner", "inner/back"]), loop);
    expect(l.groups.get("inner")!.groups.size).toBe(0);
  });
  it("watches the children of expanded nodes, deeper ones once their parent is known", () => {
    const open = new Set(["inner", "inner/deep"]);
    expect(childrenToWatch(buildLevel("wf", parent, open, new Map()), open)).toEqual(["kid"]);
    expect(childrenToWatch(buildLevel("wf", parent, open, new Map([["kid", kid]])), open)).toEqual(["kid", "grandkid"]);
    expect(childrenToWatch(buildLevel("wf", parent, new Set(), children), new Set())).toEqual([]);
  });
});

describe("nested layout", () => {
  for (const [name, engine] of [
    ["dagre", undefined],
    ["layered", layeredLayout],
  ] as const) {
    it(`${name}: draws the child's graph inside its group, the group in its parent's order`, () => {
      const l = buildLevel("wf", parent, new Set(["inner", "inner/deep"]), children);
      const layout = nestedLayout(nestedInput(l, fixed), engine);
      const boxes = flatBoxes(layout);
      expect([...boxes.keys()].sort()).toEqual(
        ["after", "inner", "inner/a", "inner/b", "inner/c", "inner/d", "inner/deep", "inner/deep/x", "inner/deep/y", "prepare"].sort(),
      );
      const group = layout.boxes.get("inner")!;
      // The group is bigger than a box and holds every node of the child (and the grandchild).
      expect(group.width).toBeGreaterThanOrEqual(NODE_W);
      expect(group.height).toBeGreaterThan(4 * NODE_H);
      for (const [p, b] of boxes) if (p.startsWith("inner/")) expect(inside(b, group), p).toBe(true);
      const deep = { ...boxes.get("inner/deep")!, height: layout.groups.get("inner")!.inner.boxes.get("deep")!.height };
      expect(inside(boxes.get("inner/deep/x")!, deep)).toBe(true);
      // Inner nodes sit below the header; the header is what arrows move to.
      expect(boxes.get("inner")!.height).toBe(NODE_H);
      expect(boxes.get("inner/a")!.y).toBeGreaterThanOrEqual(group.y + NODE_H);
      // The child's edges are its own, the parent's edges join the group.
      expect(layout.edges.map((e) => `${e.from}>${e.to}`).sort()).toEqual(["inner>after", "prepare>inner"]);
      const inner = layout.groups.get("inner")!.inner;
      expect(inner.edges.map((e) => `${e.from}>${e.to}`).sort()).toEqual(["a>b", "a>c", "b>d", "c>d", "d>deep"]);
      expect(boxes.get("prepare")!.y + NODE_H).toBeLessThanOrEqual(group.y);
      expect(group.y + group.height).toBeLessThanOrEqual(boxes.get("after")!.y);
      // Inside the child, dependents are below their dependencies.
      expect(boxes.get("inner/a")!.y).toBeLessThan(boxes.get("inner/b")!.y);
      expect(boxes.get("inner/b")!.y).toBeLessThan(boxes.get("inner/d")!.y);
    });
  }
  it("keys the structure at every level, not the phases", () => {
    const key = (open: string[], kids = children) => nestedKey(nestedInput(buildLevel("wf", parent, new Set(open), kids), fixed));
    expect(key([])).toBe(key([]));
    expect(key(["inner"])).not.toBe(key([]));
    expect(key(["inner", "inner/deep"])).not.toBe(key(["inner"]));
    const grown = new Map(children).set("grandkid", [...grandkid, n("z", ["y"])]);
    expect(key(["inner", "inner/deep"], grown)).not.toBe(key(["inner", "inner/deep"]));
  });
  it("collapsed, is the plain layout", () => {
    const l = buildLevel("wf", parent, new Set(), children);
    const layout = nestedLayout(nestedInput(l, fixed));
    expect(layout.groups.size).toBe(0);
    expect([...flatBoxes(layout).keys()]).toEqual(["prepare", "inner", "after"]);
  });
});
