// Phase vocabulary of the admin API (NodeExecution.phase, Execution.phase)
// and how the console shows it. Pure: unit-tested in phases.test.ts.

/** Fill colours of DAG boxes and timeline bars, one per node phase. */
export const PHASE_COLORS: Readonly<Record<string, string>> = {
  Pending: "#9e9e9e", // grey
  Running: "#1e88e5", // blue
  Retrying: "#fb8c00", // orange
  Succeeded: "#43a047", // green
  Failed: "#e53935", // red
  Skipped: "#d5dade", // light grey
  Aborted: "#4e555b", // dark grey
};

/** Phases whose fill is light enough to need dark text. */
const LIGHT_FILLS = new Set(["Pending", "Skipped"]);

/** The fill for a phase; an empty or unknown phase counts as Pending. */
export function phaseColor(phase: string): string {
  return PHASE_COLORS[phase] ?? PHASE_COLORS.Pending;
}

/** Readable text colour on top of phaseColor(phase). */
export function phaseTextColor(phase: string): string {
  return LIGHT_FILLS.has(phase) || !(phase in PHASE_COLORS) ? "#1b1f23" : "#ffffff";
}

/** A workflow in one of these phases will not change by itself: its watch stream closes. */
export function isTerminalWorkflowPhase(phase: string): boolean {
  return phase === "Succeeded" || phase === "Failed" || phase === "Aborted";
}

/** A node in one of these phases has finished (for progress counts). */
export function isFinishedNodePhase(phase: string): boolean {
  return phase === "Succeeded" || phase === "Failed" || phase === "Skipped" || phase === "Aborted";
}

/** A node in one of these phases has a live pod (logs can be followed). */
export function isActiveNodePhase(phase: string): boolean {
  return phase === "Running" || phase === "Retrying";
}

export interface Progress {
  /** Nodes in a finished phase (succeeded, failed, skipped or aborted). */
  finished: number;
  succeeded: number;
  failed: number;
  total: number;
}

/** Progress of a workflow from its nodes, as the list's progress column shows it. */
export function progress(nodes: ReadonlyArray<{ phase: string }>): Progress {
  let finished = 0;
  let succeeded = 0;
  let failed = 0;
  for (const n of nodes) {
    if (isFinishedNodePhase(n.phase)) finished++;
    if (n.phase === "Succeeded") succeeded++;
    if (n.phase === "Failed") failed++;
  }
  return { finished, succeeded, failed, total: nodes.length };
}

/** Whether a node is an approval gate waiting for someone to approve or reject it. */
export function isWaitingGate(node: { kind: string; taskPhase: string }): boolean {
  return node.kind === "gate" && node.taskPhase === "waiting-for-approval";
}

/** Whether a node runs a child Workflow (sub-workflows and dynamic nodes). */
export function hasChildWorkflow(node: { resource?: { kind: string; name: string } }): boolean {
  return node.resource?.kind === "Workflow" && node.resource.name !== "";
}

/** The second line of a DAG box: array item counts, or the phase. */
export function nodeSubtitle(node: {
  phase: string;
  kind: string;
  taskPhase: string;
  attempts: number;
  cached: boolean;
  itemsTotal: number;
  itemsSucceeded: number;
  itemsFailed: number;
}): string {
  const parts: string[] = [];
  if (node.kind === "array" || node.itemsTotal > 0) {
    parts.push(`items ${node.itemsSucceeded}/${node.itemsFailed}/${node.itemsTotal}`);
  } else {
    parts.push(node.phase || "Pending");
  }
  if (isWaitingGate(node)) parts.push("awaiting approval");
  if (node.cached) parts.push("cached");
  if (node.attempts > 1) parts.push(`×${node.attempts}`);
  return parts.join(" · ");
}
