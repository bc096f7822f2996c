// API errors for the banner, one slot per source (the list's polling, the
// watch stream, an action...), so a later success of one source clears
// only its own error.
import { useSyncExternalStore } from "react";
import { errorText } from "./api";

export interface ShownError {
  source: string;
  text: string;
}

let errors: ShownError[] = [];
const listeners = new Set<() => void>();

function emit(): void {
  for (const l of listeners) l();
}

export function reportError(source: string, e: unknown, prefix = ""): void {
  const text = prefix + errorText(e);
  const rest = errors.filter((x) => x.source !== source);
  errors = [...rest, { source, text }];
  emit();
}

export function clearError(source: string): void {
  if (!errors.some((x) => x.source === source)) return;
  errors = errors.filter((x) => x.source !== source);
  emit();
}

export function clearAllErrors(): void {
  if (errors.length === 0) return;
  errors = [];
  emit();
}

export function useErrors(): ShownError[] {
  return useSyncExternalStore(
    (l) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    () => errors,
  );
}
