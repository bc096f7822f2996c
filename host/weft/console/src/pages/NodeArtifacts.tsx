// A node's stored artifacts in the node panel: name, kind, size, digest,
// and a download through the admin API's data proxy (CreateDownloadLink,
// which passes the same middleware as every call): the browser then
// fetches the bytes from the store with the presigned URL.
import { useState } from "react";
import { admin } from "../api";
import { clearError, reportError } from "../errors";
import { type ArtifactRef, formatBytes, nodeArtifacts, shortDigest } from "../text";

interface Props {
  namespace: string;
  name: string;
  nodeId: string;
  outputs: string;
  /** An archived run: CreateDownloadLink serves its artifacts while the store keeps them. */
  archived?: boolean;
}

export function NodeArtifacts({ namespace, name, nodeId, outputs, archived = false }: Props) {
  const artifacts = nodeArtifacts(outputs);
  if (artifacts.length === 0) return null;
  return (
    <section className="section">
      <h3>Artifacts</h3>
      <table className="events" data-testid="node-artifacts">
        <thead>
          <tr>
            <th>Name</th>
            <th>Kind</th>
            <th>Size</th>
            <th>Digest</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {artifacts.map((a) => (
            <ArtifactRow key={a.name} artifact={a} namespace={namespace} name={name} nodeId={nodeId} archived={archived} />
          ))}
        </tbody>
      </table>
    </section>
  );
}

function ArtifactRow({
  artifact: a,
  namespace,
  name,
  nodeId,
  archived,
}: {
  artifact: ArtifactRef;
  namespace: string;
  name: string;
  nodeId: string;
  archived: boolean;
}) {
  const [busy, setBusy] = useState(false);
  // A local repository's URL is a path on the server's machine, which a
  // page may not open: it is shown instead.
  const [local, setLocal] = useState("");
  const download = async () => {
    setBusy(true);
    try {
      const link = await admin.createDownloadLink({ namespace, workflow: name, node: nodeId, artifact: a.name });
      clearError("artifact");
      if (link.signedUrl.startsWith("file://")) setLocal(decodeURI(link.signedUrl.slice("file://".length)));
      else window.open(link.signedUrl, "_blank", "noopener");
    } catch (e) {
      reportError("artifact", e, `Download ${a.name}: `);
    } finally {
      setBusy(false);
    }
  };
  return (
    <tr data-artifact={a.name}>
      <td>{a.name}</td>
      <td>{a.kind === "directory" ? "directory (tar.zst)" : a.kind}</td>
      <td title={`${a.size} bytes`}>{formatBytes(a.size)}</td>
      <td>
        <code className="digest" title={a.digest}>
          {shortDigest(a.digest)}
        </code>
      </td>
      <td>
        <button
          type="button"
          data-testid="artifact-download"
          disabled={busy}
          onClick={download}
          title={`weft cp ${name}/${nodeId}/${a.name} DEST${archived ? " (an archived run's, while the store keeps it)" : ""}`}
        >
          Download
        </button>
        {local && <div className="muted small">on the server: {local}</div>}
      </td>
    </tr>
  );
}
