// The DAG as SVG: boxes coloured by phase, edges as paths, pan (drag), zoom
// (wheel), keyboard navigation. Live updates re-render only the boxes whose
// look changed: boxes are memoised and compared field by field, the edge
// layer only changes with the layout, and pan/zoom writes the transform
// straight to the DOM without a React render.
import { memo, useCallback, useEffect, useLayoutEffect, useRef, type KeyboardEvent, type PointerEvent } from "react";
import type { NodeExecution } from "../api";
import { directionOfKey, neighbourInDirection } from "../graph/nav";
import { chipPosition, CHIP, fitLabel, MAX_CHIPS, NODE_H } from "../graph/sizes";
import type { Box, LaidEdge, Layout } from "../graph/types";
import { hasChildWorkflow, nodeSubtitle, phaseColor, phaseTextColor } from "../phases";
import { onLinkClick } from "../router";
import { workflowHref } from "../routes";

export interface Chip {
  key: string;
  phase: string;
  title: string;
}

export interface DagViewProps {
  label: string;
  nodes: readonly NodeExecution[];
  layout: Layout | null;
  namespace: string;
  selected: string | null;
  expanded: ReadonlySet<string>;
  chips: ReadonlyMap<string, readonly Chip[]>;
  onOpen: (id: string) => void;
  onToggle: (id: string) => void;
  /** Called after each render that applied new node data (for performance marks). */
  onApplied?: (firstPaint: boolean) => void;
  compact?: boolean;
}

interface View {
  x: number;
  y: number;
  k: number;
}

const MIN_K = 0.05;
const MAX_K = 2.5;

export function isExpandable(n: NodeExecution): boolean {
  return n.kind === "array" || n.itemsTotal > 0 || hasChildWorkflow(n);
}

export function DagView(props: DagViewProps) {
  const { layout, nodes, onOpen, onToggle, onApplied } = props;
  const svgRef = useRef<SVGSVGElement>(null);
  const vpRef = useRef<SVGGElement>(null);
  const view = useRef<View>({ x: 0, y: 0, k: 1 });
  const fitted = useRef(false);
  const painted = useRef(false);

  const apply = useCallback(() => {
    const v = view.current;
    vpRef.current?.setAttribute("transform", `translate(${v.x},${v.y}) scale(${v.k})`);
  }, []);

  const fit = useCallback(() => {
    const svg = svgRef.current;
    if (!svg || !layout) return;
    const cw = svg.clientWidth || 800;
    const ch = svg.clientHeight || 500;
    // Fit the whole graph, but never so small that labels cannot be read
    // at all: huge graphs start at the top, centred, at a legible scale.
    const k = Math.min(1, Math.max(0.35, Math.min(cw / (layout.width || 1), ch / (layout.height || 1))));
    view.current = {
      k,
      x: (cw - layout.width * k) / 2,
      y: layout.height * k <= ch ? (ch - layout.height * k) / 2 : 8,
    };
    apply();
  }, [layout, apply]);

  useLayoutEffect(() => {
    if (layout && !fitted.current) {
      fitted.current = true;
      fit();
    }
  }, [layout, fit]);

  // After every commit that carried node data, tell the page (perf marks).
  useLayoutEffect(() => {
    if (!layout || !onApplied) return;
    onApplied(!painted.current);
    painted.current = true;
  }, [nodes, layout, onApplied]);

  useWheelZoom(svgRef, view, apply, layout !== null);
  const pan = usePan(view, apply);

  const zoomBy = (f: number) => {
    const svg = svgRef.current;
    if (!svg) return;
    zoomAt(view.current, f, svg.clientWidth / 2, svg.clientHeight / 2);
    apply();
  };

  const focusNode = (id: string) => {
    const svg = svgRef.current;
    const box = layout?.boxes.get(id);
    if (!svg || !box) return;
    scrollIntoView(view.current, box, svg.clientWidth, svg.clientHeight);
    apply();
    svg.querySelector<SVGGElement>(`[data-node="${CSS.escape(id)}"]`)?.focus({ preventScroll: true });
  };

  const onKeyDown = (e: KeyboardEvent<SVGSVGElement>) => {
    const id = (e.target as Element).closest?.("[data-node]")?.getAttribute("data-node");
    if (!id || !layout) return;
    const dir = directionOfKey(e.key);
    if (dir) {
      e.preventDefault();
      const next = neighbourInDirection(layout.boxes, id, dir);
      if (next) focusNode(next);
    } else if (e.key === "Enter") {
      e.preventDefault();
      onOpen(id);
    } else if (e.key === " " || e.key === "+" || e.key === "-") {
      const n = nodes.find((x) => x.id === id);
      if (n && isExpandable(n)) {
        e.preventDefault();
        onToggle(id);
      }
    }
  };

  const onClick = (e: React.MouseEvent<SVGSVGElement>) => {
    if (pan.moved()) return;
    const target = e.target as Element;
    if (target.closest("a")) return;
    const toggle = target.closest("[data-toggle]");
    const id = target.closest("[data-node]")?.getAttribute("data-node");
    if (!id) return;
    if (toggle) onToggle(id);
    else onOpen(id);
  };

  if (!layout) return <div className={`dag-wrap ${props.compact ? "compact" : ""} loading`}>laying out…</div>;
  return (
    <div className={`dag-wrap ${props.compact ? "compact" : ""}`}>
      <svg
        ref={svgRef}
        className="dag"
        role="group"
        aria-label={props.label}
        onKeyDown={onKeyDown}
        onClick={onClick}
        onPointerDown={pan.down}
        onPointerMove={pan.move}
        onPointerUp={pan.up}
        onPointerCancel={pan.up}
      >
        <g ref={vpRef}>
          <EdgeLayer edges={layout.edges} />
          <NodeLayer {...props} layout={layout} />
        </g>
      </svg>
      <div className="dag-controls">
        <button type="button" onClick={() => zoomBy(1.25)} aria-label="Zoom in">
          +
        </button>
        <button type="button" onClick={() => zoomBy(0.8)} aria-label="Zoom out">
          −
        </button>
        <button type="button" onClick={fit} aria-label="Fit">
          fit
        </button>
      </div>
    </div>
  );
}

function zoomAt(v: View, factor: number, cx: number, cy: number): void {
  const k = Math.min(MAX_K, Math.max(MIN_K, v.k * factor));
  // Keep the point under the cursor where it is.
  v.x = cx - ((cx - v.x) * k) / v.k;
  v.y = cy - ((cy - v.y) * k) / v.k;
  v.k = k;
}

function scrollIntoView(v: View, b: Box, cw: number, ch: number): void {
  const m = 24;
  const left = b.x * v.k + v.x;
  const top = b.y * v.k + v.y;
  const right = left + b.width * v.k;
  const bottom = top + b.height * v.k;
  if (left < m) v.x += m - left;
  else if (right > cw - m) v.x -= right - (cw - m);
  if (top < m) v.y += m - top;
  else if (bottom > ch - m) v.y -= bottom - (ch - m);
}

/** Wheel zoom around the cursor; a non-passive listener so the page does not scroll. */
function useWheelZoom(
  svgRef: React.RefObject<SVGSVGElement | null>,
  view: React.RefObject<View>,
  apply: () => void,
  mounted: boolean,
) {
  useEffect(() => {
    const svg = svgRef.current;
    if (!svg) return;
    const onWheel = (e: WheelEvent) => {
      e.preventDefault();
      const r = svg.getBoundingClientRect();
      const unit = e.deltaMode === 1 ? 16 : 1;
      zoomAt(view.current, Math.exp(-e.deltaY * unit * 0.0015), e.clientX - r.left, e.clientY - r.top);
      apply();
    };
    svg.addEventListener("wheel", onWheel, { passive: false });
    return () => svg.removeEventListener("wheel", onWheel);
  }, [svgRef, view, apply, mounted]);
}

/**
 * Drag to pan. The pointer is captured only once it moved a few pixels, so
 * a plain click still reaches the box under it (capture would retarget it).
 */
function usePan(view: React.RefObject<View>, apply: () => void) {
  const drag = useRef<{ id: number; sx: number; sy: number; vx: number; vy: number; moved: boolean } | null>(null);
  const lastMoved = useRef(false);
  return {
    down(e: PointerEvent<SVGSVGElement>) {
      if (e.button !== 0) return;
      const v = view.current;
      drag.current = { id: e.pointerId, sx: e.clientX, sy: e.clientY, vx: v.x, vy: v.y, moved: false };
      lastMoved.current = false;
    },
    move(e: PointerEvent<SVGSVGElement>) {
      const d = drag.current;
      if (!d || d.id !== e.pointerId) return;
      const dx = e.clientX - d.sx;
      const dy = e.clientY - d.sy;
      if (!d.moved && Math.hypot(dx, dy) < 4) return;
      if (!d.moved) {
        d.moved = true;
        e.currentTarget.setPointerCapture(e.pointerId);
        e.currentTarget.classList.add("panning");
      }
      view.current.x = d.vx + dx;
      view.current.y = d.vy + dy;
      apply();
    },
    up(e: PointerEvent<SVGSVGElement>) {
      const d = drag.current;
      if (!d || d.id !== e.pointerId) return;
      lastMoved.current = d.moved;
      drag.current = null;
      e.currentTarget.classList.remove("panning");
    },
    /** Whether the click that follows ended a drag (then it opens nothing). */
    moved() {
      const m = lastMoved.current;
      lastMoved.current = false;
      return m;
    },
  };
}

const EdgeLayer = memo(function EdgeLayer({ edges }: { edges: readonly LaidEdge[] }) {
  return (
    <g className="dag-edges">
      {edges.map((e) => (
        <path key={`${e.from}\u0000${e.to}`} d={e.path} data-testid="dag-edge" data-from={e.from} data-to={e.to} />
      ))}
    </g>
  );
});

function NodeLayer(props: DagViewProps & { layout: Layout }) {
  const { layout, nodes, selected, expanded, chips, namespace } = props;
  const out: React.ReactNode[] = [];
  for (const n of nodes) {
    const box = layout.boxes.get(n.id);
    // A node added since the last layout appears once the new layout lands.
    if (!box) continue;
    const isExp = expanded.has(n.id);
    out.push(
      <DagNode
        key={n.id}
        node={n}
        box={box}
        selected={selected === n.id}
        expanded={isExp}
        expandable={isExpandable(n)}
        chips={isExp ? chips.get(n.id) : undefined}
        namespace={namespace}
      />,
    );
  }
  return <g className="dag-nodes">{out}</g>;
}

interface DagNodeProps {
  node: NodeExecution;
  box: Box;
  selected: boolean;
  expanded: boolean;
  expandable: boolean;
  chips: readonly Chip[] | undefined;
  namespace: string;
}

/** Same look: every NodeExecution field a box shows, and its placement. */
export function sameLook(a: DagNodeProps, b: DagNodeProps): boolean {
  const x = a.node;
  const y = b.node;
  return (
    a.box === b.box &&
    a.selected === b.selected &&
    a.expanded === b.expanded &&
    a.expandable === b.expandable &&
    a.chips === b.chips &&
    a.namespace === b.namespace &&
    x.id === y.id &&
    x.phase === y.phase &&
    x.message === y.message &&
    x.attempts === y.attempts &&
    x.cached === y.cached &&
    x.kind === y.kind &&
    x.taskPhase === y.taskPhase &&
    x.itemsTotal === y.itemsTotal &&
    x.itemsSucceeded === y.itemsSucceeded &&
    x.itemsFailed === y.itemsFailed &&
    x.resource?.kind === y.resource?.kind &&
    x.resource?.name === y.resource?.name
  );
}

const DagNode = memo(function DagNode({ node, box, selected, expanded, expandable, chips, namespace }: DagNodeProps) {
  const fill = phaseColor(node.phase);
  const ink = phaseTextColor(node.phase);
  const child = hasChildWorkflow(node) ? node.resource!.name : null;
  // Room on the right for the expand toggle and the child link.
  const labelWidth = box.width - (expandable ? 22 : 0) - (child ? 22 : 0);
  return (
    <g
      className={`dag-node${selected ? " selected" : ""}`}
      transform={`translate(${box.x},${box.y})`}
      tabIndex={0}
      role="button"
      aria-label={`${node.id}, ${node.phase || "Pending"}${node.message ? `: ${node.message}` : ""}`}
      data-testid="dag-node"
      data-node={node.id}
      data-phase={node.phase}
      data-kind={node.kind}
    >
      <title>{`${node.id} — ${node.phase || "Pending"}${node.message ? `\n${node.message}` : ""}`}</title>
      {expanded ? (
        // Expanded: a neutral body (chips of every phase stay visible on it)
        // under a header in the phase colour.
        <>
          <rect className="dag-box dag-body" width={box.width} height={box.height} rx={6} style={{ stroke: fill }} />
          <rect width={box.width} height={NODE_H} rx={6} style={{ fill }} />
        </>
      ) : (
        <rect className="dag-box" width={box.width} height={box.height} rx={6} style={{ fill }} />
      )}
      <text x={10} y={19} className="dag-label" style={{ fill: ink }}>
        {fitLabel(node.id, labelWidth)}
      </text>
      <text x={10} y={36} className="dag-sub" style={{ fill: ink }}>
        {fitLabel(nodeSubtitle(node), labelWidth)}
      </text>
      {expandable && (
        <g data-toggle="" className="dag-toggle" transform={`translate(${box.width - 22},6)`}>
          <title>{expanded ? "Collapse" : "Expand"}</title>
          <rect width={16} height={16} rx={3} />
          <text x={8} y={12.5} textAnchor="middle">
            {expanded ? "−" : "+"}
          </text>
        </g>
      )}
      {child && (
        <g transform={`translate(${box.width - (expandable ? 44 : 22)},6)`}>
          <a
            href={workflowHref(namespace, child)}
            className="dag-child-link"
            data-testid="child-workflow-link"
            onClick={(e) => onLinkClick(e, workflowHref(namespace, child))}
          >
            <title>{`Open child workflow ${child}`}</title>
            <rect width={16} height={16} rx={3} />
            <text x={8} y={12.5} textAnchor="middle">
              ↗
            </text>
          </a>
        </g>
      )}
      {expanded && <Chips chips={chips} width={box.width} />}
    </g>
  );
}, sameLook);

function Chips({ chips, width }: { chips: readonly Chip[] | undefined; width: number }) {
  if (!chips) {
    return (
      <text x={10} y={NODE_H + 14} className="dag-sub dag-body-text">
        loading…
      </text>
    );
  }
  const shown = chips.slice(0, MAX_CHIPS);
  const last = shown.length === 0 ? { y: NODE_H - CHIP } : chipPosition(shown.length - 1, width);
  return (
    <g className="dag-chips">
      {shown.map((c, i) => {
        const p = chipPosition(i, width);
        return (
          <rect key={c.key} x={p.x} y={p.y} width={CHIP} height={CHIP} rx={2} style={{ fill: phaseColor(c.phase) }} data-phase={c.phase}>
            <title>{c.title}</title>
          </rect>
        );
      })}
      <text x={10} y={last.y + CHIP + 14} className="dag-sub dag-body-text">
        {chips.length === 0 ? "none yet" : chips.length > MAX_CHIPS ? `+${chips.length - MAX_CHIPS} more` : ""}
      </text>
    </g>
  );
}

