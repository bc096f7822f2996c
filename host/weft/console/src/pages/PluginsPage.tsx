// `/plugins`: every loaded plugin (ListPlugins), refreshed every 5 s.
import { useEffect, useState } from "react";
import { admin, poll, type PluginInfo } from "../api";
import { clearError, reportError } from "../errors";
import { shortDigest } from "../text";

const REFRESH_MS = 5000;

export function PluginsPage() {
  const [plugins, setPlugins] = useState<PluginInfo[] | null>(null);
  useEffect(() => {
    const ctl = new AbortController();
    void poll(
      REFRESH_MS,
      ctl.signal,
      async (signal) => {
        const res = await admin.listPlugins({}, { signal });
        if (signal.aborted) return;
        setPlugins(res.plugins);
        clearError("plugins");
      },
      (e) => reportError("plugins", e, "Listing plugins: "),
    );
    return () => ctl.abort();
  }, []);

  return (
    <main className="page">
      <div className="toolbar">
        <h1>Plugins</h1>
        <span className="muted">{plugins === null ? "loading…" : `${plugins.length} loaded · refreshed every 5 s`}</span>
      </div>
      {plugins !== null && plugins.length === 0 && <p className="empty">No plugins loaded.</p>}
      {plugins !== null && plugins.length > 0 && (
        <div className="scroll-x">
          <table className="plugins">
            <thead>
              <tr>
                <th>Name</th>
                <th>Kind</th>
                <th>Task types</th>
                <th>Digest</th>
                <th>Other versions</th>
                <th>Pinning</th>
                <th>Breaker</th>
                <th className="num">Calls</th>
                <th className="num">Traps</th>
                <th className="num">Mean call</th>
                <th>Error</th>
              </tr>
            </thead>
            <tbody>
              {plugins.map((p) => (
                <PluginRow key={p.name} p={p} />
              ))}
            </tbody>
          </table>
        </div>
      )}
    </main>
  );
}

function PluginRow({ p }: { p: PluginInfo }) {
  const others = p.versions.filter((v) => !v.current && v.digest !== p.digest);
  return (
    <tr data-testid="plugin-row" data-name={p.name} className={p.error ? "has-error" : undefined}>
      <td className="strong">{p.name}</td>
      <td data-testid="plugin-kind">{p.kind}</td>
      <td data-testid="plugin-task-types">{p.taskTypes.join(", ")}</td>
      <td>
        <code title={p.digest} data-testid="plugin-digest">
          {shortDigest(p.digest)}
        </code>
      </td>
      <td>
        {others.length === 0
          ? "—"
          : others.map((v) => (
              <code key={v.digest} title={v.digest} className="digest-chip">
                {shortDigest(v.digest)}
              </code>
            ))}
      </td>
      <td>{p.pinning || "latest"}</td>
      <td>{p.breaker ? <span className={`tag breaker-${p.breaker}`}>{p.breaker}</span> : "—"}</td>
      <td className="num" data-testid="plugin-calls">
        {p.calls.toString()}
      </td>
      <td className="num">{p.traps.toString()}</td>
      <td className="num">{p.calls > 0n ? `${p.meanCallMs.toFixed(2)} ms` : "—"}</td>
      <td className="error-text">{p.error}</td>
    </tr>
  );
}
