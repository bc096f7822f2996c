// `/locks?namespace=`: the mutexes, semaphores and parallelism limits of
// one namespace (ListLocks), each with its holders and its line of
// waiters in the order they will get it, re-listed every 2 s. The
// namespace is picked like the Workflows page's (ListNamespaces).
import { useEffect, useState } from "react";
import { admin, errorText, poll, type LockClaim, type LockInfo } from "../api";
import { NamespacePicker } from "../components/NamespacePicker";
import { clearError, reportError } from "../errors";
import { listed, useNamespaces, useResolvedNamespace } from "../namespaces";
import { Link, navigate } from "../router";
import { locksHref, nodeHref, workflowHref } from "../routes";
import { elapsed, formatDuration, formatTime } from "../time";

const REFRESH_MS = 2000;

export type LocksListing =
  | { state: "loading" }
  /** `now`: when it was listed, for the "held for" durations. */
  | { state: "listed"; locks: LockInfo[]; now: number }
  | { state: "failed"; text: string };

/** Edits the namespace in the URL after a pause in typing, so the URL is the deep link. */
function useDebouncedNamespace(namespace: string) {
  const [ns, setNs] = useState(namespace);
  useEffect(() => setNs(namespace), [namespace]);
  useEffect(() => {
    if (ns === namespace) return;
    const t = setTimeout(() => navigate(locksHref(ns), { replace: true }), 400);
    return () => clearTimeout(t);
  }, [ns, namespace]);
  return { ns, setNs };
}

export function LocksPage({ namespace: route }: { namespace: string }) {
  const [listing, setListing] = useState<LocksListing>({ state: "loading" });
  const f = useDebouncedNamespace(route);
  const namespaces = useNamespaces();
  // null: waiting for the list to know what "default" stands for.
  const shown = useResolvedNamespace(route, namespaces);
  const namespace = shown ?? route;

  useEffect(() => {
    if (shown !== null && shown !== route) navigate(locksHref(shown), { replace: true });
  }, [shown, route]);

  useEffect(() => {
    setListing({ state: "loading" });
    if (shown === null) return;
    // Locks belong to one namespace: nothing to ask for without one.
    if (namespace === "") {
      clearError("locks");
      return;
    }
    const ctl = new AbortController();
    void poll(
      REFRESH_MS,
      ctl.signal,
      async (signal) => {
        const res = await admin.listLocks({ namespace }, { signal });
        if (signal.aborted) return;
        setListing({ state: "listed", locks: res.locks, now: Date.now() });
        clearError("locks");
      },
      (e) => {
        // Not the last listing: a lock's holders are only worth showing current.
        setListing({ state: "failed", text: errorText(e) });
        reportError("locks", e, `Listing the locks of ${namespace}: `);
      },
    );
    return () => ctl.abort();
  }, [namespace, shown]);

  return (
    <main className="page locks-page">
      <div className="toolbar">
        <h1>Locks</h1>
        {namespaces.state === "failed" ? (
          <label>
            Namespace
            <input
              value={f.ns}
              placeholder="namespace"
              onChange={(e) => f.setNs(e.target.value.trim())}
              data-testid="locks-namespace"
            />
          </label>
        ) : (
          <NamespacePicker
            value={namespace}
            namespaces={listed(namespaces)}
            emptyLabel="choose a namespace"
            onChange={(ns) => {
              f.setNs(ns);
              navigate(locksHref(ns));
            }}
          />
        )}
        <span className="muted" aria-live="polite" data-testid="locks-count">
          {namespace === "" && "no namespace"}
          {namespace !== "" && listing.state === "loading" && "loading…"}
          {listing.state === "listed" &&
            `${listing.locks.length} lock${listing.locks.length === 1 ? "" : "s"} · refreshed every ${REFRESH_MS / 1000} s`}
          {listing.state === "failed" && "not listed"}
        </span>
      </div>
      <LocksView namespace={namespace} listing={listing} />
    </main>
  );
}

/** The page below its toolbar: pure, so it renders in unit tests. */
export function LocksView({ namespace, listing }: { namespace: string; listing: LocksListing }) {
  if (namespace === "") {
    return (
      <p className="empty" data-testid="locks-no-namespace">
        Enter a namespace: locks belong to one.
      </p>
    );
  }
  if (listing.state === "loading") return null;
  if (listing.state === "failed") {
    return (
      <div className="locks-failed" role="alert" data-testid="locks-error">
        <strong>The locks of {namespace} could not be listed</strong>
        <p>{listing.text}</p>
      </div>
    );
  }
  if (listing.locks.length === 0) {
    return (
      <p className="empty" data-testid="locks-empty">
        No locks in {namespace}: no workflow there uses a mutex, a semaphore or a parallelism limit.
      </p>
    );
  }
  return (
    <div className="locks">
      {listing.locks.map((l) => (
        <LockSection key={`${l.namespace}/${l.lock}`} lock={l} fallbackNamespace={namespace} now={listing.now} />
      ))}
    </div>
  );
}

function LockSection({ lock, fallbackNamespace, now }: { lock: LockInfo; fallbackNamespace: string; now: number }) {
  const ns = lock.namespace || fallbackNamespace;
  const held = lock.holders.length;
  const full = lock.limit > 0 && held >= lock.limit;
  const id = `lock-${lock.lock.replace(/[^A-Za-z0-9_-]/g, "-")}`;
  return (
    <section className="lock" data-testid="lock" data-lock={lock.lock} aria-labelledby={id}>
      <header className="lock-head">
        <h2 id={id}>
          <code>{lock.lock}</code>
        </h2>
        <span className={`tag lock-held${full ? " full" : ""}`} data-testid="lock-held">
          {`held ${held}/${lock.limit}`}
        </span>
        {lock.waiters.length + lock.beyond > 0 && (
          <span className="muted" data-testid="lock-waiting">
            {`${lock.waiters.length + lock.beyond} waiting`}
          </span>
        )}
      </header>
      {held === 0 ? (
        <p className="muted lock-free">Free: nobody holds it.</p>
      ) : (
        <div className="scroll-x">
          <table className="lock-holders" aria-label={`Holders of ${lock.lock}`}>
            <thead>
              <tr>
                <th>Holder</th>
                <th>Node</th>
                <th>Since</th>
                <th>Held for</th>
              </tr>
            </thead>
            <tbody>
              {lock.holders.map((h) => (
                <HolderRow key={`${h.workflow}/${h.node}`} h={h} ns={ns} now={now} />
              ))}
            </tbody>
          </table>
        </div>
      )}
      <h3>Waiting</h3>
      {lock.waiters.length === 0 ? (
        <p className="muted lock-no-waiters">Nobody waits.</p>
      ) : (
        <ol className="lock-waiters" data-testid="lock-waiters" aria-label={`Waiting for ${lock.lock}, first first`}>
          {lock.waiters.map((w, i) => (
            <WaiterItem key={`${w.workflow}/${w.node}`} w={w} position={i + 1} ns={ns} now={now} />
          ))}
        </ol>
      )}
      {lock.beyond > 0 && (
        <p className="muted" data-testid="lock-beyond">
          {`and ${lock.beyond} more behind them: a long line keeps only its head in the Lock; each waiting workflow's status says its place.`}
        </p>
      )}
    </section>
  );
}

/** The workflow's name linking to its page, and the node's to its panel. */
function ClaimLinks({ c, ns }: { c: LockClaim; ns: string }) {
  return (
    <>
      <Link href={workflowHref(ns, c.workflow)} className="strong" data-testid="claim-workflow">
        {c.workflow}
      </Link>
      {c.node !== "" && (
        <>
          {" · node "}
          <Link href={nodeHref(ns, c.workflow, c.node)}>
            <code>{c.node}</code>
          </Link>
        </>
      )}
    </>
  );
}

function HolderRow({ h, ns, now }: { h: LockClaim; ns: string; now: number }) {
  // held_since is set once it holds; a claim listed before that has its arrival only.
  const since = h.heldSince || h.since;
  return (
    <tr data-testid="lock-holder" data-workflow={h.workflow} data-node={h.node}>
      <td>
        <Link href={workflowHref(ns, h.workflow)} className="strong" data-testid="claim-workflow">
          {h.workflow}
        </Link>
      </td>
      <td>
        {h.node === "" ? (
          <span className="muted">whole workflow</span>
        ) : (
          <Link href={nodeHref(ns, h.workflow, h.node)}>
            <code>{h.node}</code>
          </Link>
        )}
      </td>
      <td title={h.since && h.since !== since ? `asked ${h.since}, holds since ${since}` : since}>{formatTime(since)}</td>
      <td data-testid="held-for">{formatDuration(elapsed(since, "", now))}</td>
    </tr>
  );
}

function WaiterItem({ w, position, ns, now }: { w: LockClaim; position: number; ns: string; now: number }) {
  return (
    <li data-testid="lock-waiter" data-workflow={w.workflow} data-node={w.node} data-position={position}>
      <ClaimLinks c={w} ns={ns} /> <span className="tag" data-testid="waiter-priority">{`priority ${w.priority}`}</span>{" "}
      <span className="muted" title={w.since}>
        waiting since {formatTime(w.since)}
        {w.since !== "" && ` (${formatDuration(elapsed(w.since, "", now))})`}
      </span>
    </li>
  );
}
