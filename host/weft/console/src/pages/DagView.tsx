// The DAG as SVG: boxes coloured by phase, edges as paths, pan (drag), zoom
// (wheel), keyboard navigation. Live updates re-render only the boxes whose
// look changed: boxes are memoised and compared field by field, the edge
// layer only changes with the layout, and pan/zoom writes the transform
// straight to the DOM without a React render.
//
// An open sub-workflow node is a group: its box is the node's header over
// the child Workflow's own graph (see graph/nested.ts). Boxes are named by
// path (`data-node="inner/step"` inside the group of `inner`).
import { memo, useCallback, useEffect, useLayoutEffect, useMemo, useRef, type KeyboardEvent, type PointerEvent } from "react";
import type { NodeExecution } from "../api";
import { flatBoxes, joinPath, PATH_SEP, walkLevel, type GraphLevel, type GroupLayout, type NestedLayout } from "../graph/nested";
import { directionOfKey, neighbourInDirection } from "../graph/nav";
import { chipPosition, CHIP, fitLabel, MAX_CHIPS, NODE_H } from "../graph/sizes";
import type { Box, LaidEdge } from "../graph/types";
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
  /** The graph: the page's nodes, with the open groups' children inside. */
  level: GraphLevel<NodeExecution>;
  layout: NestedLayout | null;
  namespace: string;
  /** The path of the node whose panel is open. */
  selected: string | null;
  /** Paths of the expanded boxes (arrays, sub-workflows). */
  expanded: ReadonlySet<string>;
  /** Array items of expanded array boxes, by path. */
  chips: ReadonlyMap<string, readonly Chip[]>;
  /** Opens a node: `workflow` is the Workflow it belongs to (the page's, or a child's). */
  onOpen: (workflow: string, id: string, path: string) => void;
  /** Expands or collapses a box; `open` undefined flips it. */
  onToggle: (path: string, open?: boolean) => void;
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

/** The enclosing group's path of a node path, or null at the top. */
function parentPath(path: string): string | null {
  const i = path.lastIndexOf(PATH_SEP);
  return i < 0 ? null : path.slice(0, i);
}

export function DagView(props: DagViewProps) {
  const { layout, level, onOpen, onToggle, onApplied } = props;
  // Every drawn node by path, with the Workflow it belongs to.
  const byPath = useMemo(() => {
    const m = new Map<string, { node: NodeExecution; workflow: string }>();
    for (const { path, node, level: l } of walkLevel(level)) m.set(path, { node, workflow: l.workflow });
    return m;
  }, [level]);
  // Boxes in page coordinates, for arrows and scrolling; only drawn ones.
  const boxes = useMemo(() => {
    const all = layout ? flatBoxes(layout) : new Map<string, Box>();
    for (const p of all.keys()) if (!byPath.has(p)) all.delete(p);
    return all;
  }, [layout, byPath]);
  // A box to focus once it is in the DOM (after a toggle redraws it).
  const wantFocus = useRef<string | null>(null);
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
  }, [level, layout, onApplied]);

  useWheelZoom(svgRef, view, apply, layout !== null);
  const pan = usePan(view, apply);

  const zoomBy = (f: number) => {
    const svg = svgRef.current;
    if (!svg) return;
    zoomAt(view.current, f, svg.clientWidth / 2, svg.clientHeight / 2);
    apply();
  };

  const focusNode = (path: string) => {
    const svg = svgRef.current;
    const box = boxes.get(path);
    if (!svg || !box) return;
    scrollIntoView(view.current, box, svg.clientWidth, svg.clientHeight);
    apply();
    svg.querySelector<SVGGElement>(`[data-node="${CSS.escape(path)}"]`)?.focus({ preventScroll: true });
  };

  // Boxes keep their element when they open or close, so the focus stays
  // on a toggled box; but "-" inside a group removes the focused box with
  // the group: the focus goes to the group's header.
  useLayoutEffect(() => {
    const path = wantFocus.current;
    if (!path) return;
    wantFocus.current = null;
    const el = svgRef.current?.querySelector<SVGGElement>(`[data-node="${CSS.escape(path)}"]`);
    if (el && document.activeElement !== el) el.focus({ preventScroll: true });
  });

  const toggleByKey = (path: string, open?: boolean) => {
    wantFocus.current = path;
    onToggle(path, open);
  };

  const onKeyDown = (e: KeyboardEvent<SVGSVGElement>) => {
    const path = (e.target as Element).closest?.("[data-node]")?.getAttribute("data-node");
    if (!path || !layout) return;
    const dir = directionOfKey(e.key);
    const here = byPath.get(path);
    if (dir) {
      e.preventDefault();
      const next = neighbourInDirection(boxes, path, dir);
      if (next) focusNode(next);
    } else if (e.key === "Enter") {
      e.preventDefault();
      if (here) onOpen(here.workflow, here.node.id, path);
    } else if (e.key === " " || e.key === "+" || e.key === "-") {
      const open = e.key === " " ? undefined : e.key === "+";
      if (here && isExpandable(here.node) && (open === undefined || open !== props.expanded.has(path))) {
        e.preventDefault();
        toggleByKey(path, open);
      } else if (e.key === "-" && parentPath(path) !== null) {
        // "-" inside a group closes the group, the focus on its header.
        e.preventDefault();
        toggleByKey(parentPath(path)!, false);
      }
    }
  };

  const onClick = (e: React.MouseEvent<SVGSVGElement>) => {
    if (pan.moved()) return;
    const target = e.target as Element;
    if (target.closest("a")) return;
    const toggle = target.closest("[data-toggle]");
    const path = target.closest("[data-node]")?.getAttribute("data-node");
    const here = path ? byPath.get(path) : undefined;
    if (!path || !here) return;
    if (toggle) onToggle(path);
    else onOpen(here.workflow, here.node.id, path);
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
          <LevelLayer {...props} level={level} layout={layout} />
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

const EdgeLayer = memo(function EdgeLayer({ edges, prefix }: { edges: readonly LaidEdge[]; prefix: string }) {
  return (
    <g className="dag-edges">
      {edges.map((e) => (
        <path
          key={`${e.from}\u0000${e.to}`}
          d={e.path}
          data-testid="dag-edge"
          data-from={joinPath(prefix, e.from)}
          data-to={joinPath(prefix, e.to)}
        />
      ))}
    </g>
  );
});

/** One level: its edges, its boxes, and inside each open group the child's level. */
function LevelLayer(props: DagViewProps & { level: GraphLevel<NodeExecution>; layout: NestedLayout }) {
  const { layout, level, selected, expanded, chips, namespace } = props;
  const out: React.ReactNode[] = [];
  for (const n of level.nodes) {
    const box = layout.boxes.get(n.id);
    // A node added since the last layout appears once the new layout lands.
    if (!box) continue;
    const path = joinPath(level.prefix, n.id);
    const sub = level.groups.get(n.id);
    const group = sub ? layout.groups.get(n.id) : undefined;
    const isExp = expanded.has(path);
    const expandable = isExpandable(n);
    // Every box sits in a slot of the same shape, open or not, so opening
    // or closing a group keeps its header's element (and the focus).
    out.push(
      <g
        key={n.id}
        className={group ? "dag-group" : "dag-slot"}
        transform={`translate(${box.x},${box.y})`}
        data-testid={group ? "dag-group" : undefined}
        data-group={group ? path : undefined}
        data-workflow={group ? sub!.workflow : undefined}
      >
        {group && <rect className="dag-group-body" width={box.width} height={box.height} rx={8} style={{ stroke: phaseColor(n.phase) }} />}
        <DagNode
          node={n}
          path={path}
          // A group that just closed keeps its big box until the next
          // layout lands: draw only its header meanwhile.
          box={group || layout.groups.has(n.id) ? headerBox(box.width) : box}
          selected={selected === path}
          expanded={isExp && expandable}
          expandable={expandable}
          body={isExp && expandable && !group}
          chips={isExp && !group ? chips.get(path) : undefined}
          namespace={namespace}
        />
        {group && <GroupBody {...props} sub={sub!} group={group} />}
      </g>,
    );
  }
  return (
    <>
      <EdgeLayer edges={layout.edges} prefix={level.prefix} />
      <g className="dag-nodes">{out}</g>
    </>
  );
}

const headers = new Map<number, Box>();
/** A group's header box (one object per width, so the header's memo holds). */
function headerBox(width: number): Box {
  let b = headers.get(width);
  if (!b) {
    b = { x: 0, y: 0, width, height: NODE_H };
    headers.set(width, b);
  }
  return b;
}

function GroupBody(props: DagViewProps & { sub: GraphLevel<NodeExecution>; group: GroupLayout }) {
  const { sub, group } = props;
  return (
    <g className="dag-group-inner" transform={`translate(${group.dx},${group.dy})`} role="group" aria-label={`Child workflow ${sub.workflow}`}>
      <LevelLayer {...props} level={sub} layout={group.inner} />
    </g>
  );
}

interface DagNodeProps {
  node: NodeExecution;
  /** Its path in the drawn graph (its id at the top level). */
  path: string;
  /** Its size (it is drawn at its slot's origin). */
  box: Box;
  selected: boolean;
  /** The toggle shows "collapse". */
  expanded: boolean;
  expandable: boolean;
  /** Drawn as an open box with a body under the header (array items, or a child still loading). */
  body: boolean;
  chips: readonly Chip[] | undefined;
  namespace: string;
}

/** Same look: every NodeExecution field a box shows, and its placement. */
export function sameLook(a: DagNodeProps, b: DagNodeProps): boolean {
  const x = a.node;
  const y = b.node;
  return (
    a.box === b.box &&
    a.path === b.path &&
    a.selected === b.selected &&
    a.expanded === b.expanded &&
    a.body === b.body &&
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

const DagNode = memo(function DagNode({ node, path, box, selected, expanded, expandable, body, chips, namespace }: DagNodeProps) {
  const fill = phaseColor(node.phase);
  const ink = phaseTextColor(node.phase);
  const child = hasChildWorkflow(node) ? node.resource!.name : null;
  // Room on the right for the expand toggle and the child link.
  const labelWidth = box.width - (expandable ? 22 : 0) - (child ? 22 : 0);
  return (
    <g
      className={`dag-node${selected ? " selected" : ""}`}
      tabIndex={0}
      role="button"
      aria-label={`${node.id}, ${node.phase || "Pending"}${node.message ? `: ${node.message}` : ""}`}
      aria-expanded={expandable ? expanded : undefined}
      data-testid="dag-node"
      data-node={path}
      data-id={node.id}
      data-phase={node.phase}
      data-kind={node.kind}
    >
      <title>{`${node.id} — ${node.phase || "Pending"}${node.message ? `\n${node.message}` : ""}`}</title>
      {body ? (
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
      {body && <Chips chips={chips} width={box.width} loading={hasChildWorkflow(node) ? "loading the child workflow…" : "loading…"} />}
    </g>
  );
}, sameLook);

function Chips({ chips, width, loading }: { chips: readonly Chip[] | undefined; width: number; loading: string }) {
  if (!chips) {
    return (
      <text x={10} y={NODE_H + 14} className="dag-sub dag-body-text">
        {loading}
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

