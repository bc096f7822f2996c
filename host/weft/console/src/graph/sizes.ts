// Box sizes of the DAG view. Expanded array and sub-workflow boxes grow to
// hold a grid of chips (items, or the child workflow's nodes), which
// changes the layout, so sizes are part of the layout's structure key.

export const NODE_W = 180;
export const NODE_H = 46;
export const EXPANDED_W = 300;
export const CHIP = 14;
export const CHIP_GAP = 4;
export const CHIP_PAD = 8;
/** More chips than this are summed up as "+N more": a box stays readable. */
export const MAX_CHIPS = 300;

export function chipColumns(width: number): number {
  return Math.max(1, Math.floor((width - 2 * CHIP_PAD + CHIP_GAP) / (CHIP + CHIP_GAP)));
}

export function nodeSize(expanded: boolean, chipCount: number): { width: number; height: number } {
  if (!expanded) return { width: NODE_W, height: NODE_H };
  const shown = Math.min(chipCount, MAX_CHIPS);
  const rows = Math.max(1, Math.ceil(shown / chipColumns(EXPANDED_W)));
  // One more line for "+N more" / "loading".
  return { width: EXPANDED_W, height: NODE_H + rows * (CHIP + CHIP_GAP) + CHIP_PAD + 14 };
}

/** Top-left corner of chip `i` inside an expanded box. */
export function chipPosition(i: number, width: number): { x: number; y: number } {
  const cols = chipColumns(width);
  return {
    x: CHIP_PAD + (i % cols) * (CHIP + CHIP_GAP),
    y: NODE_H + Math.floor(i / cols) * (CHIP + CHIP_GAP),
  };
}

/** Cuts a label to fit `width` pixels of 12px system-font text. */
export function fitLabel(text: string, width: number): string {
  const max = Math.max(4, Math.floor((width - 20) / 7));
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
