import { describe, expect, it } from "vitest";
import { chooseEngine, computeLayout } from "./layout";
import { layeredLayout, placeRow } from "./layered";
import { dagEdges, layoutInput, structureKey } from "./model";
import { neighbourInDirection } from "./nav";
import { nodeSize, NODE_H, NODE_W } from "./sizes";
import type { Box, Layout, LayoutInput } from "./types";

const fixed = () => ({ width: NODE_W, height: NODE_H });

function overlaps(a: Box, b: Box): boolean {
  return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
}

function assertNoOverlap(l: Layout): void {
  const boxes = [...l.boxes.values()].sort((a, b) => a.y - b.y || a.x - b.x);
  for (let i = 0; i < boxes.length; i++) {
    // Boxes are sorted by y: only compare with those that start above this one's bottom.
    for (let j = i + 1; j < boxes.length && boxes[j].y < boxes[i].y + boxes[i].height; j++) {
      expect(overlaps(boxes[i], boxes[j])).toBe(false);
    }
  }
}

/** Random layered DAG: the shape that takes dagre over a minute at 2,000 nodes. */
function randomLayers(n: number, width: number): { id: string; dependsOn: string[] }[] {
  let seed = 42;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const nodes = [];
  for (let i = 0; i < n; i++) {
    const layer = Math.floor(i / width);
    const deps = layer === 0 ? [] : [0, 1].map(() => `n${(layer - 1) * width + Math.floor(rnd() * width)}`);
    nodes.push({ id: `n${i}`, dependsOn: deps });
  }
  return nodes;
}

describe("edges from depends_on", () => {
  it("draws one edge per known dependency", () => {
    const edges = dagEdges([
      { id: "a", dependsOn: [] },
      { id: "b", dependsOn: ["a", "a", "b", "missing"] },
      { id: "c", dependsOn: ["a", "b"] },
    ]);
    expect(edges).toEqual([
      { from: "a", to: "b" },
      { from: "a", to: "c" },
      { from: "b", to: "c" },
    ]);
  });
  it("keys the structure, not the phases", () => {
    const a = layoutInput([{ id: "a", dependsOn: [] }, { id: "b", dependsOn: ["a"] }], fixed);
    const same = layoutInput([{ id: "a", dependsOn: [] }, { id: "b", dependsOn: ["a"] }], fixed);
    const moreEdges = layoutInput([{ id: "a", dependsOn: [] }, { id: "b", dependsOn: [] }], fixed);
    const bigger = layoutInput([{ id: "a", dependsOn: [] }, { id: "b", dependsOn: ["a"] }], (id) =>
      nodeSize(id === "a", 40),
    );
    expect(structureKey(a)).toBe(structureKey(same));
    expect(structureKey(a)).not.toBe(structureKey(moreEdges));
    expect(structureKey(a)).not.toBe(structureKey(bigger));
  });
});

describe("layout", () => {
  const diamond: LayoutInput = layoutInput(
    [
      { id: "a", dependsOn: [] },
      { id: "b", dependsOn: ["a"] },
      { id: "c", dependsOn: ["a"] },
      { id: "d", dependsOn: ["b", "c"] },
    ],
    fixed,
  );

  for (const [name, fn] of [
    ["dagre", computeLayout],
    ["layered", (i: LayoutInput) => layeredLayout(i)],
  ] as const) {
    it(`${name}: places dependents below their dependencies, without overlaps`, () => {
      const l = fn(diamond);
      const y = (id: string) => l.boxes.get(id)!.y;
      expect(y("a")).toBeLessThan(y("b"));
      expect(y("b")).toBe(y("c"));
      expect(y("c")).toBeLessThan(y("d"));
      expect(l.edges.map((e) => `${e.from}>${e.to}`).sort()).toEqual(["a>b", "a>c", "b>d", "c>d"]);
      expect(l.edges.every((e) => e.path.startsWith("M"))).toBe(true);
      assertNoOverlap(l);
      for (const b of l.boxes.values()) {
        expect(b.x).toBeGreaterThanOrEqual(0);
        expect(b.x + b.width).toBeLessThanOrEqual(l.width + 0.01);
        expect(b.y + b.height).toBeLessThanOrEqual(l.height + 0.01);
      }
    });
  }

  it("uses dagre for small graphs and the layered engine for large ones", () => {
    expect(chooseEngine(diamond)).toBe("dagre");
    expect(chooseEngine(layoutInput(randomLayers(500, 25), fixed))).toBe("layered");
  });

  it("lays out 2,000 nodes in random layers quickly and without overlaps", () => {
    const input = layoutInput(randomLayers(2000, 100), fixed);
    const t0 = performance.now();
    const l = computeLayout(input);
    const ms = performance.now() - t0;
    expect(l.engine).toBe("layered");
    expect(l.boxes.size).toBe(2000);
    expect(ms).toBeLessThan(1000);
    assertNoOverlap(l);
  });

  it("wraps a 2,000-wide fan-out into rows", () => {
    const nodes = [{ id: "root", dependsOn: [] as string[] }];
    for (let i = 0; i < 1998; i++) nodes.push({ id: `p${i}`, dependsOn: ["root"] });
    nodes.push({ id: "join", dependsOn: nodes.slice(1).map((n) => n.id) });
    const l = layeredLayout(layoutInput(nodes, fixed));
    expect(l.width).toBeLessThan(45 * (NODE_W + 16));
    assertNoOverlap(l);
    expect(l.boxes.get("join")!.y).toBeGreaterThan(Math.max(...nodes.slice(1, -1).map((n) => l.boxes.get(n.id)!.y)));
  });

  it("survives a cycle", () => {
    const l = layeredLayout(
      layoutInput(
        [
          { id: "a", dependsOn: ["b"] },
          { id: "b", dependsOn: ["a"] },
          { id: "c", dependsOn: [] },
        ],
        fixed,
      ),
    );
    expect(l.boxes.size).toBe(3);
    assertNoOverlap(l);
  });

  it("keeps gaps between placed boxes", () => {
    const x = placeRow([0, 0, 0], [100, 100, 100], 10);
    expect(x[1] - x[0]).toBeGreaterThanOrEqual(110);
    expect(x[2] - x[1]).toBeGreaterThanOrEqual(110);
    // centred around the wanted spot
    expect(Math.abs(x[1])).toBeLessThan(1);
  });
});

describe("arrow-key navigation", () => {
  const boxes = new Map<string, Box>([
    ["top", { x: 100, y: 0, width: 100, height: 40 }],
    ["left", { x: 0, y: 100, width: 100, height: 40 }],
    ["right", { x: 200, y: 100, width: 100, height: 40 }],
    ["below", { x: 110, y: 200, width: 100, height: 40 }],
  ]);
  it("moves to the nearest box in the direction", () => {
    expect(neighbourInDirection(boxes, "top", "down")).toBe("left");
    expect(neighbourInDirection(boxes, "left", "right")).toBe("right");
    expect(neighbourInDirection(boxes, "right", "down")).toBe("below");
    expect(neighbourInDirection(boxes, "below", "up")).toBe("right");
    expect(neighbourInDirection(boxes, "right", "left")).toBe("left");
    expect(neighbourInDirection(boxes, "top", "up")).toBeNull();
    expect(neighbourInDirection(boxes, "nope", "up")).toBeNull();
  });
});
