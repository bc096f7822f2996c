// The Locks page's rendering (LocksView, rendered to static HTML: the
// tests run without a DOM).
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { LockInfoSchema } from "./gen/weft/admin/v1/admin_pb";
import { LocksView, type LocksListing } from "./pages/LocksPage";

const NOW = Date.parse("2024-05-01T12:00:00Z");

function render(namespace: string, listing: LocksListing): string {
  return renderToStaticMarkup(<LocksView namespace={namespace} listing={listing} />);
}

/** The page's text, without its tags. */
function text(html: string): string {
  return html
    .replace(/<[^>]+>/g, " ")
    .replace(/&amp;/g, "&")
    .replace(/\s+/g, " ")
    .trim();
}

/** The `attr` of every element marked `data-testid=testid`, in document order. */
function attrs(html: string, testid: string, attr: string): string[] {
  const out: string[] = [];
  for (const m of html.matchAll(/<[a-z0-9]+ [^>]*>/g)) {
    if (!m[0].includes(`data-testid="${testid}"`)) continue;
    const v = new RegExp(`${attr}="([^"]*)"`).exec(m[0]);
    out.push(v ? v[1] : "");
  }
  return out;
}

/** The text of every element marked `data-testid=testid` that holds text only. */
function texts(html: string, testid: string): string[] {
  return [...html.matchAll(new RegExp(`data-testid="${testid}"[^>]*>([^<]*)<`, "g"))].map((m) => m[1]);
}

/** The HTML of the `data-lock=name` section. */
function section(html: string, name: string): string {
  const start = html.indexOf(`data-lock="${name}"`);
  expect(start, `a section for ${name}`).toBeGreaterThanOrEqual(0);
  const end = html.indexOf("</section>", start);
  return html.slice(start, end);
}

const listed = (...locks: MessageInitShape<typeof LockInfoSchema>[]): LocksListing => ({
  state: "listed",
  locks: locks.map((l) => create(LockInfoSchema, l)),
  now: NOW,
});

describe("locks page", () => {
  it("shows a held mutex with its holder and its waiters in the server's order", () => {
    const html = render(
      "default",
      listed({
        namespace: "default",
        lock: "mutex/db",
        limit: 1,
        holders: [{ workflow: "etl-1", since: "2024-05-01T11:58:00Z", heldSince: "2024-05-01T11:59:00.250Z" }],
        // The order they get it in: a higher priority first, then arrival.
        waiters: [
          { workflow: "urgent", priority: 5, since: "2024-05-01T11:59:30Z" },
          { workflow: "etl-2", since: "2024-05-01T11:58:30Z" },
        ],
        // A long line: the Lock lists its head, and says how many more.
        beyond: 40,
      }),
    );
    const db = section(html, "mutex/db");
    const t = text(db);
    expect(t).toContain("mutex/db");
    expect(t).toContain("held 1/1");
    expect(t).toContain("42 waiting");
    expect(texts(db, "lock-beyond")[0]).toContain("and 40 more behind them");
    expect(attrs(db, "lock-holder", "data-workflow")).toEqual(["etl-1"]);
    // Held for: from held_since, not the arrival.
    expect(texts(db, "held-for")).toEqual(["59s"]);
    expect(t).toContain("whole workflow");
    // Waiters: a numbered list, in the order given (not re-sorted here).
    expect(db).toContain("<ol");
    expect(attrs(db, "lock-waiter", "data-workflow")).toEqual(["urgent", "etl-2"]);
    expect(attrs(db, "lock-waiter", "data-position")).toEqual(["1", "2"]);
    expect(t.indexOf("urgent priority 5")).toBeGreaterThanOrEqual(0);
    expect(t.indexOf("etl-2 priority 0")).toBeGreaterThan(t.indexOf("urgent priority 5"));
    // Every workflow name links to its page.
    expect(attrs(db, "claim-workflow", "href")).toEqual(["/workflows/default/etl-1", "/workflows/default/urgent", "/workflows/default/etl-2"]);
  });

  it("shows node claims with links to the node, and free locks, one section each", () => {
    const html = render(
      "ml",
      listed(
        { namespace: "ml", lock: "parallelism/namespace", limit: 4 },
        {
          namespace: "ml",
          lock: "semaphore/gpu",
          limit: 2,
          holders: [
            { workflow: "train", node: "fit", heldSince: "2024-05-01T11:00:00Z" },
            { workflow: "eval", node: "score", heldSince: "2024-05-01T11:30:00Z" },
          ],
          waiters: [{ workflow: "train", node: "fan/2", since: "2024-05-01T11:55:00Z" }],
        },
      ),
    );
    expect(attrs(html, "lock", "data-lock")).toEqual(["parallelism/namespace", "semaphore/gpu"]);
    const free = text(section(html, "parallelism/namespace"));
    expect(free).toContain("held 0/4");
    expect(free).toContain("Free");
    expect(free).toContain("Nobody waits");
    const gpu = section(html, "semaphore/gpu");
    expect(text(gpu)).toContain("held 2/2");
    expect(gpu).toContain('href="/workflows/ml/train/nodes/fit"');
    expect(gpu).toContain('href="/workflows/ml/train/nodes/fan%2F2"');
    expect(texts(gpu, "held-for")).toEqual(["1h 0m", "30m 0s"]);
    expect(attrs(gpu, "lock-waiter", "data-node")).toEqual(["fan/2"]);
  });

  it("says when the namespace has no locks", () => {
    const html = render("quiet", listed());
    expect(attrs(html, "locks-empty", "class")).toEqual(["empty"]);
    expect(text(html)).toContain("No locks in quiet");
    expect(html).not.toContain('data-testid="lock"');
  });

  it("names the problem when the listing fails, showing no stale locks", () => {
    const html = render("default", { state: "failed", text: "Unavailable: listing Locks in default: connection refused" });
    expect(attrs(html, "locks-error", "role")).toEqual(["alert"]);
    expect(text(html)).toContain("The locks of default could not be listed");
    expect(text(html)).toContain("Unavailable: listing Locks in default: connection refused");
    expect(html).not.toContain('data-testid="lock"');
  });

  it("asks for a namespace rather than listing all", () => {
    expect(text(render("", { state: "loading" }))).toContain("Enter a namespace");
    expect(render("default", { state: "loading" })).toBe("");
  });
});
