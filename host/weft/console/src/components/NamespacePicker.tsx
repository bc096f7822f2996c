// The Workflows and Locks pages' namespace: a select of the namespaces the
// caller may list (ListNamespaces), or, when the server cannot say (an
// older server, a failed call), the text field of before.
import type { ReactNode } from "react";
import { pickerOptions } from "../namespaces";

export function NamespacePicker({
  value,
  namespaces,
  onChange,
  emptyLabel,
}: {
  value: string;
  /** The listed namespaces; null while they are being listed. */
  namespaces: readonly string[] | null;
  onChange: (namespace: string) => void;
  /** What "" is called on this page. */
  emptyLabel: string;
}): ReactNode {
  const options = pickerOptions(namespaces, value, emptyLabel);
  return (
    <label>
      Namespace
      <select
        data-testid="namespace-picker"
        value={value}
        disabled={namespaces === null}
        aria-busy={namespaces === null}
        onChange={(e) => onChange(e.target.value)}
      >
        {options.map((o) => (
          <option key={`${o.listed}:${o.value}`} value={o.value} disabled={!o.listed}>
            {o.label}
          </option>
        ))}
      </select>
    </label>
  );
}
