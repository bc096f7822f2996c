// A scrolling list that renders only the rows in view (plus a few), so a
// list of thousands of rows costs as much as one screenful.
import { useCallback, useEffect, useLayoutEffect, useRef, useState, type ReactNode } from "react";

export function visibleRange(scrollTop: number, viewHeight: number, rowHeight: number, count: number, overscan: number) {
  const first = Math.max(0, Math.floor(scrollTop / rowHeight) - overscan);
  const last = Math.min(count, Math.ceil((scrollTop + viewHeight) / rowHeight) + overscan);
  return { first, last };
}

interface Props {
  count: number;
  rowHeight: number;
  /** Renders row `index`; the element gets `style` positioning from here. */
  row: (index: number, style: React.CSSProperties) => ReactNode;
  className?: string;
  label: string;
  /** Enter on a row. */
  onOpen: (index: number) => void;
}

export function VirtualRows({ count, rowHeight, row, className, label, onOpen }: Props) {
  const box = useRef<HTMLDivElement>(null);
  const [scrollTop, setScrollTop] = useState(0);
  const [viewHeight, setViewHeight] = useState(600);
  // The row to focus once it is rendered (arrow keys can move past the view).
  const focusNext = useRef<number | null>(null);

  useLayoutEffect(() => {
    const el = box.current;
    if (!el) return;
    const ro = new ResizeObserver(() => setViewHeight(el.clientHeight));
    ro.observe(el);
    setViewHeight(el.clientHeight);
    return () => ro.disconnect();
  }, []);

  useEffect(() => {
    const i = focusNext.current;
    if (i === null) return;
    const el = box.current?.querySelector<HTMLElement>(`[data-index="${i}"]`);
    if (el) {
      el.focus({ preventScroll: true });
      focusNext.current = null;
    }
  });

  const [, rerender] = useState(0);
  const moveTo = useCallback(
    (i: number) => {
      const el = box.current;
      if (!el || i < 0 || i >= count) return;
      const top = i * rowHeight;
      if (top < el.scrollTop) el.scrollTop = top;
      else if (top + rowHeight > el.scrollTop + el.clientHeight) el.scrollTop = top + rowHeight - el.clientHeight;
      const row = el.querySelector<HTMLElement>(`[data-index="${i}"]`);
      if (row) {
        row.focus({ preventScroll: true });
        return;
      }
      // Not rendered yet: focus it after the render for the new scroll position.
      focusNext.current = i;
      setScrollTop(el.scrollTop);
      rerender((n) => n + 1);
    },
    [count, rowHeight],
  );

  const onKeyDown = (e: React.KeyboardEvent) => {
    const idx = Number((e.target as HTMLElement).dataset.index);
    if (Number.isNaN(idx)) return;
    const page = Math.max(1, Math.floor(viewHeight / rowHeight) - 1);
    const to: Record<string, number> = {
      ArrowDown: idx + 1,
      ArrowUp: idx - 1,
      PageDown: Math.min(count - 1, idx + page),
      PageUp: Math.max(0, idx - page),
      Home: 0,
      End: count - 1,
    };
    if (e.key === "Enter") {
      e.preventDefault();
      onOpen(idx);
    } else if (e.key in to) {
      e.preventDefault();
      moveTo(to[e.key]);
    }
  };

  const { first, last } = visibleRange(scrollTop, viewHeight, rowHeight, count, 8);
  const rows: ReactNode[] = [];
  for (let i = first; i < last; i++) {
    rows.push(row(i, { position: "absolute", top: i * rowHeight, height: rowHeight, left: 0, right: 0 }));
  }
  return (
    <div
      ref={box}
      className={className}
      role="rowgroup"
      aria-label={label}
      onScroll={(e) => setScrollTop(e.currentTarget.scrollTop)}
      onKeyDown={onKeyDown}
    >
      <div style={{ position: "relative", height: count * rowHeight }}>{rows}</div>
    </div>
  );
}
