// Shapes shared by the layout engines, the layout worker and the DAG view.

export interface LayoutNodeIn {
  id: string;
  width: number;
  height: number;
}

export interface LayoutEdgeIn {
  from: string;
  to: string;
}

export interface LayoutInput {
  nodes: LayoutNodeIn[];
  edges: LayoutEdgeIn[];
}

/** A laid-out box; x and y are its top-left corner. */
export interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface LaidEdge {
  from: string;
  to: string;
  /** SVG path data, ready for <path d>. */
  path: string;
}

export interface Layout {
  boxes: Map<string, Box>;
  edges: LaidEdge[];
  width: number;
  height: number;
  /** Which engine produced it (dagre for small graphs, layered for large ones). */
  engine: "dagre" | "layered";
}
