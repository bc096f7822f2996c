// Pure parts of the pages: list rows, virtual window, timeline bars, text.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { visibleRange } from "./components/VirtualRows";
import { ExecutionSchema, NodeExecutionSchema } from "./gen/weft/admin/v1/admin_pb";
import { barPlacement, MIN_BAR_PCT, timelineBars } from "./pages/TimelineView";
import { historyRowHref, toHistoryRow } from "./pages/HistoryPage";
import { lockText, toRow } from "./pages/WorkflowListPage";
import { prettyJson, shortDigest } from "./text";

const node = (id: string, phase: string, startedAt = "", finishedAt = "") =>
  create(NodeExecutionSchema, { id, phase, startedAt, finishedAt });

describe("workflow list rows", () => {
  it("counts progress from the nodes", () => {
    const e = create(ExecutionSchema, {
      id: { namespace: "ml", name: "train-1" },
      phase: "Running",
      nodes: [node("a", "Succeeded"), node("b", "Failed"), node("c", "Running"), node("d", "Pending")],
    });
    expect(toRow(e)).toMatchObject({ namespace: "ml", name: "train-1", phase: "Running", finished: 2, succeeded: 1, failed: 1, total: 4 });
  });

  it("say which lock a workflow waits for or holds", () => {
    const waiting = toRow(
      create(ExecutionSchema, {
        phase: "Pending",
        message: "waiting for semaphore/fifty, held by a, b, c and 47 more (50/50); number 3 in line",
        waitingFor: "semaphore/fifty",
        holding: ["parallelism/namespace"],
      }),
    );
    expect(lockText(waiting)).toEqual(["waits for semaphore/fifty", waiting.message]);
    const holding = toRow(create(ExecutionSchema, { phase: "Running", holding: ["mutex/db", "semaphore/fifty"] }));
    expect(lockText(holding)).toEqual(["holds mutex/db +1", "mutex/db, semaphore/fifty"]);
    expect(lockText(toRow(create(ExecutionSchema, { phase: "Running" })))).toEqual(["", ""]);
  });
});

describe("history rows", () => {
  it("open a live run by name and an archived one by its uid", () => {
    const live = toHistoryRow(create(ExecutionSchema, { id: { namespace: "ml", name: "train-1" }, uid: "u-live", phase: "Running" }));
    expect(live).toMatchObject({ namespace: "ml", name: "train-1", archived: false });
    expect(historyRowHref(live)).toBe("/workflows/ml/train-1");
    const gone = toHistoryRow(
      create(ExecutionSchema, { id: { namespace: "ml", name: "train-1" }, uid: "u-old", phase: "Succeeded", archived: true }),
    );
    expect(gone).toMatchObject({ archived: true, uid: "u-old", phase: "Succeeded" });
    expect(historyRowHref(gone)).toBe("/workflows/ml/train-1?uid=u-old");
  });
});

describe("virtual rows", () => {
  it("renders only the rows in view plus overscan", () => {
    expect(visibleRange(0, 340, 34, 1000, 8)).toEqual({ first: 0, last: 18 });
    expect(visibleRange(34 * 500, 340, 34, 1000, 8)).toEqual({ first: 492, last: 518 });
    expect(visibleRange(34 * 995, 340, 34, 1000, 8)).toEqual({ first: 987, last: 1000 });
  });
});

describe("timeline bars", () => {
  it("has one bar per started node, in start order, running ones up to now", () => {
    const now = Date.parse("2024-01-01T00:10:00Z");
    const bars = timelineBars(
      [
        node("late", "Succeeded", "2024-01-01T00:05:00Z", "2024-01-01T00:06:00Z"),
        node("early", "Running", "2024-01-01T00:01:00Z"),
        node("never", "Pending"),
      ],
      now,
    );
    expect(bars.map((b) => b.id)).toEqual(["early", "late"]);
    expect(bars[0]).toMatchObject({ running: true, end: now });
    expect(bars[1].end - bars[1].start).toBe(60_000);
  });
});

describe("timeline bar placement", () => {
  it("places a bar by its start and duration within the span", () => {
    expect(barPlacement(1_000, 2_000, 0, 4_000)).toEqual({ left: 25, width: 25 });
    expect(barPlacement(0, 4_000, 0, 4_000)).toEqual({ left: 0, width: 100 });
  });
  it("keeps a bar that took no time visible and inside its track", () => {
    expect(barPlacement(2_000, 2_000, 0, 4_000)).toEqual({ left: 50, width: MIN_BAR_PCT });
    // At the very end (the last node of a run finished within the second).
    const end = barPlacement(4_000, 4_000, 0, 4_000);
    expect(end.width).toBe(MIN_BAR_PCT);
    expect(end.left + end.width).toBeCloseTo(100);
  });
  it("clamps a bar that starts before the first moment", () => {
    expect(barPlacement(-500, 1_000, 0, 4_000).left).toBe(0);
  });
});

describe("text", () => {
  it("shortens digests", () => {
    expect(shortDigest(`sha256:${"a".repeat(64)}`)).toBe("sha256:aaaaaaaaaaaa");
    expect(shortDigest("")).toBe("");
  });
  it("pretty-prints JSON and keeps other text", () => {
    expect(prettyJson('{"a":1}')).toBe('{\n  "a": 1\n}');
    expect(prettyJson("not json")).toBe("not json");
    expect(prettyJson("  ")).toBe("");
  });
});
