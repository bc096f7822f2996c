// SVG path data for edges.

export interface Point {
  x: number;
  y: number;
}

const r = (v: number) => Math.round(v * 10) / 10;

/** A vertical S-curve from the bottom of one box to the top of another. */
export function bezierDown(a: Point, b: Point): string {
  const dy = Math.max(20, (b.y - a.y) / 2);
  return `M${r(a.x)},${r(a.y)} C${r(a.x)},${r(a.y + dy)} ${r(b.x)},${r(b.y - dy)} ${r(b.x)},${r(b.y)}`;
}

/** A smooth path through dagre's edge points (quadratic joins at midpoints). */
export function smoothPath(points: readonly Point[]): string {
  if (points.length === 0) return "";
  if (points.length === 1) return `M${r(points[0].x)},${r(points[0].y)}`;
  let d = `M${r(points[0].x)},${r(points[0].y)}`;
  for (let i = 1; i < points.length - 1; i++) {
    const p = points[i];
    const q = points[i + 1];
    d += ` Q${r(p.x)},${r(p.y)} ${r((p.x + q.x) / 2)},${r((p.y + q.y) / 2)}`;
  }
  const last = points[points.length - 1];
  return `${d} L${r(last.x)},${r(last.y)}`;
}
