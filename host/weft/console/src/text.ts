// Small text helpers for API values.

/** `sha256:` and the first 12 hex digits; the full digest goes in a title. */
export function shortDigest(digest: string): string {
  const prefix = digest.startsWith("sha256:") ? "sha256:" : "";
  const hex = digest.slice(prefix.length);
  return hex.length > 12 ? `${prefix}${hex.slice(0, 12)}` : digest;
}

/** Pretty JSON; text that does not parse is shown as it came. */
export function prettyJson(text: string): string {
  if (text.trim() === "") return "";
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** A size in bytes as people read it: `812 B`, `1.5 KiB`, `200 MiB`. */
export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  const shown = u === 0 || v >= 100 ? Math.round(v).toString() : v.toFixed(1).replace(/\.0$/, "");
  return `${shown} ${units[u]}`;
}

/** An artifact a node stored, as its outputs record it. */
export interface ArtifactRef {
  name: string;
  key: string;
  digest: string;
  size: number;
  kind: string;
}

/** The artifacts in a node's outputs (`outputs.artifacts.<name>`), by name. */
export function nodeArtifacts(outputs: string): ArtifactRef[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(outputs);
  } catch {
    return [];
  }
  const all = (parsed as { artifacts?: unknown } | null)?.artifacts;
  if (!all || typeof all !== "object") return [];
  return Object.entries(all as Record<string, Record<string, unknown>>)
    .filter(([, a]) => a && typeof a.key === "string")
    .map(([name, a]) => ({
      name,
      key: String(a.key),
      digest: String(a.digest ?? ""),
      size: Number(a.size ?? 0),
      kind: String(a.kind ?? "file"),
    }))
    .sort((a, b) => a.name.localeCompare(b.name));
}
