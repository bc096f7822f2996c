// The Gantt view: one bar per started node, from started_at to finished_at
// (or now while it runs), coloured by phase, in start order.
import { memo, useEffect, useMemo, useState } from "react";
import type { NodeExecution } from "../api";
import { isActiveNodePhase, phaseColor } from "../phases";
import { formatDuration, parseTime } from "../time";

export interface Bar {
  id: string;
  phase: string;
  start: number;
  end: number;
  running: boolean;
}

/** Bars of the started nodes, earliest first (spec order breaks ties). */
export function timelineBars(nodes: readonly NodeExecution[], now: number): Bar[] {
  const bars: Bar[] = [];
  for (const n of nodes) {
    const start = parseTime(n.startedAt);
    if (start === null) continue;
    const fin = parseTime(n.finishedAt);
    bars.push({ id: n.id, phase: n.phase, start, end: Math.max(start, fin ?? now), running: fin === null });
  }
  return bars.sort((a, b) => a.start - b.start);
}

/** The narrowest a bar is drawn, in percent of its track (CSS adds a 2 px floor). */
export const MIN_BAR_PCT = 0.2;

/**
 * Where a bar sits in its track, in percent of the track: from its start,
 * at least MIN_BAR_PCT wide, and never past the track's end (a node that
 * took no time at the very end is drawn ending there, not beyond it).
 */
export function barPlacement(start: number, end: number, t0: number, span: number): { left: number; width: number } {
  const width = Math.min(100, Math.max(MIN_BAR_PCT, ((end - start) / span) * 100));
  const left = Math.min(Math.max(0, ((start - t0) / span) * 100), 100 - width);
  return { left, width };
}

export function TimelineView({
  nodes,
  workflowStart,
  selected,
  onOpen,
}: {
  nodes: readonly NodeExecution[];
  workflowStart: string;
  selected: string | null;
  onOpen: (id: string) => void;
}) {
  const anyRunning = nodes.some((n) => isActiveNodePhase(n.phase) || (n.startedAt !== "" && n.finishedAt === ""));
  const now = useNow(anyRunning ? 1000 : 0);
  const bars = useMemo(() => timelineBars(nodes, now), [nodes, now]);
  if (bars.length === 0) return <p className="empty">No node has started yet.</p>;
  const t0 = Math.min(parseTime(workflowStart) ?? Infinity, bars[0].start);
  const t1 = Math.max(t0 + 1, ...bars.map((b) => b.end));
  const span = t1 - t0;
  return (
    <div className="timeline" role="list" aria-label="Timeline">
      <div className="timeline-axis" aria-hidden="true">
        {[0, 0.25, 0.5, 0.75, 1].map((f) => (
          <span key={f} style={{ left: `${f * 100}%` }}>
            {formatDuration(f * span)}
          </span>
        ))}
      </div>
      {bars.map((b) => (
        <TimelineRow key={b.id} bar={b} t0={t0} span={span} selected={selected === b.id} onOpen={onOpen} />
      ))}
    </div>
  );
}

const TimelineRow = memo(function TimelineRow({
  bar,
  t0,
  span,
  selected,
  onOpen,
}: {
  bar: Bar;
  t0: number;
  span: number;
  selected: boolean;
  onOpen: (id: string) => void;
}) {
  const { left, width } = barPlacement(bar.start, bar.end, t0, span);
  return (
    <div className={`timeline-row${selected ? " selected" : ""}`} role="listitem">
      <button
        type="button"
        className="timeline-label link-button"
        data-testid="timeline-label"
        data-node={bar.id}
        onClick={() => onOpen(bar.id)}
        title={bar.id}
      >
        {bar.id}
      </button>
      <div className="timeline-track">
        <div
          className={`timeline-bar${bar.running ? " running" : ""}`}
          data-testid="timeline-bar"
          data-node={bar.id}
          data-phase={bar.phase}
          title={`${bar.id}: ${bar.phase}, ${formatDuration(bar.end - bar.start)}`}
          // The 2 px min-width of .timeline-bar must fit in the track too.
          style={{ left: `min(${left}%, 100% - 2px)`, width: `${width}%`, background: phaseColor(bar.phase) }}
          onClick={() => onOpen(bar.id)}
        />
      </div>
    </div>
  );
});

/** The current time, refreshed every `everyMs` (0: never) so running bars grow. */
function useNow(everyMs: number): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    setNow(Date.now());
    if (everyMs <= 0) return;
    const t = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(t);
  }, [everyMs]);
  return now;
}
