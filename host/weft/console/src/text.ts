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
