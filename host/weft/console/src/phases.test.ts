import { describe, expect, it } from "vitest";
import {
  hasChildWorkflow,
  isTerminalWorkflowPhase,
  isWaitingGate,
  nodeSubtitle,
  PHASE_COLORS,
  phaseColor,
  phaseTextColor,
  progress,
} from "./phases";

describe("phase colours", () => {
  it("gives each node phase its colour family", () => {
    expect(phaseColor("Pending")).toBe(PHASE_COLORS.Pending);
    expect(phaseColor("Running")).toBe("#1e88e5");
    expect(phaseColor("Retrying")).toBe("#fb8c00");
    expect(phaseColor("Succeeded")).toBe("#43a047");
    expect(phaseColor("Failed")).toBe("#e53935");
    expect(phaseColor("Skipped")).toBe("#d5dade");
    expect(phaseColor("Aborted")).toBe("#4e555b");
  });
  it("treats an empty or unknown phase as Pending", () => {
    expect(phaseColor("")).toBe(PHASE_COLORS.Pending);
    expect(phaseColor("Weird")).toBe(PHASE_COLORS.Pending);
  });
  it("keeps text readable", () => {
    expect(phaseTextColor("Skipped")).toBe("#1b1f23");
    expect(phaseTextColor("Failed")).toBe("#ffffff");
    expect(phaseTextColor("")).toBe("#1b1f23");
  });
  it("has seven distinct colours", () => {
    expect(new Set(Object.values(PHASE_COLORS)).size).toBe(7);
  });
});

describe("progress", () => {
  it("counts finished nodes of every terminal phase", () => {
    const p = progress([
      { phase: "Succeeded" },
      { phase: "Failed" },
      { phase: "Skipped" },
      { phase: "Aborted" },
      { phase: "Running" },
      { phase: "Pending" },
      { phase: "" },
    ]);
    expect(p).toEqual({ finished: 4, succeeded: 1, failed: 1, total: 7 });
  });
  it("is 0/0 without nodes", () => {
    expect(progress([])).toEqual({ finished: 0, succeeded: 0, failed: 0, total: 0 });
  });
});

describe("workflow and node kinds", () => {
  it("knows terminal workflow phases", () => {
    expect(["Succeeded", "Failed", "Aborted"].every(isTerminalWorkflowPhase)).toBe(true);
    expect(["", "Pending", "Running"].some(isTerminalWorkflowPhase)).toBe(false);
  });
  it("finds waiting approval gates", () => {
    expect(isWaitingGate({ kind: "gate", taskPhase: "waiting-for-approval" })).toBe(true);
    expect(isWaitingGate({ kind: "gate", taskPhase: "" })).toBe(false);
    expect(isWaitingGate({ kind: "task", taskPhase: "waiting-for-approval" })).toBe(false);
  });
  it("links only Workflow children", () => {
    expect(hasChildWorkflow({ resource: { kind: "Workflow", name: "child-1" } })).toBe(true);
    expect(hasChildWorkflow({ resource: { kind: "Pod", name: "p" } })).toBe(false);
    expect(hasChildWorkflow({})).toBe(false);
  });
  it("labels array nodes with items succeeded/failed/total", () => {
    const base = { phase: "Running", kind: "array", taskPhase: "", attempts: 1, cached: false };
    expect(nodeSubtitle({ ...base, itemsTotal: 10, itemsSucceeded: 6, itemsFailed: 1 })).toBe("items 6/1/10");
    expect(nodeSubtitle({ ...base, kind: "task", itemsTotal: 0, itemsSucceeded: 0, itemsFailed: 0, attempts: 3 })).toBe(
      "Running · ×3",
    );
  });
});
