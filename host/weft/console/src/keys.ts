// Page-wide keyboard shortcuts. Pure: unit-tested in keys.test.ts.

/** The parts of a keydown event the shortcuts look at. */
export interface KeyPress {
  key: string;
  defaultPrevented: boolean;
  isComposing?: boolean;
  altKey: boolean;
  ctrlKey: boolean;
  metaKey: boolean;
  shiftKey: boolean;
}

/** The parts of the focused element that decide whether it takes typed text. */
export interface FocusTarget {
  tagName?: string;
  type?: string;
  isContentEditable?: boolean;
}

/** Input types whose Escape belongs to the field (clearing, cancelling), not the page. */
const TEXT_TYPES = new Set(["", "text", "search", "email", "url", "tel", "password", "number", "date", "time", "datetime-local", "month", "week"]);

/** Whether `el` is a field one types into. */
export function isTextEntry(el: FocusTarget | null | undefined): boolean {
  if (!el) return false;
  if (el.isContentEditable) return true;
  const tag = (el.tagName ?? "").toUpperCase();
  if (tag === "TEXTAREA" || tag === "SELECT") return true;
  return tag === "INPUT" && TEXT_TYPES.has((el.type ?? "").toLowerCase());
}

/**
 * Whether a keydown closes the node panel: a plain Escape that nothing
 * else handled, outside a text field and not ending an IME composition.
 */
export function closesPanel(e: KeyPress, focused: FocusTarget | null | undefined): boolean {
  if (e.key !== "Escape" || e.defaultPrevented || e.isComposing) return false;
  if (e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) return false;
  return !isTextEntry(focused);
}
