// JSON text from the API (outputs, specs, resources), pretty-printed.
import { prettyJson } from "../text";

export function JsonBlock({ text, testid, empty = "—" }: { text: string; testid?: string; empty?: string }) {
  const pretty = prettyJson(text);
  return (
    <pre className="json" data-testid={testid}>
      {pretty === "" ? empty : pretty}
    </pre>
  );
}
