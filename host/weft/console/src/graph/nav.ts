// Arrow-key navigation between DAG boxes: the nearest box in that direction.
import type { Box } from "./types";

export type Direction = "up" | "down" | "left" | "right";

export function directionOfKey(key: string): Direction | null {
  switch (key) {
    case "ArrowUp":
      return "up";
    case "ArrowDown":
      return "down";
    case "ArrowLeft":
      return "left";
    case "ArrowRight":
      return "right";
    default:
      return null;
  }
}

/**
 * The box nearest to `from` in direction `dir`. Up/Down weigh sideways
 * distance lightly, so Down goes to the next rank (a DAG's ranks are wide);
 * Left/Right weigh it heavily, so they stay on the same rank.
 */
export function neighbourInDirection(boxes: ReadonlyMap<string, Box>, from: string, dir: Direction): string | null {
  const a = boxes.get(from);
  if (!a) return null;
  const ax = a.x + a.width / 2;
  const ay = a.y + a.height / 2;
  let best: string | null = null;
  let bestScore = Infinity;
  for (const [id, b] of boxes) {
    if (id === from) continue;
    const dx = b.x + b.width / 2 - ax;
    const dy = b.y + b.height / 2 - ay;
    const vertical = dir === "up" || dir === "down";
    const along = vertical ? (dir === "up" ? -dy : dy) : dir === "left" ? -dx : dx;
    const across = Math.abs(vertical ? dx : dy);
    if (along <= 1) continue;
    const score = along + (vertical ? 0.5 : 3) * across;
    if (score < bestScore) {
      bestScore = score;
      best = id;
    }
  }
  return best;
}
