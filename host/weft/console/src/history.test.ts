import { describe, expect, it } from "vitest";
import {
  currentToken,
  FIRST_PAGE,
  historyQuery,
  historyRequest,
  isFiltered,
  localToRfc3339,
  nextPage,
  nodeEvents,
  parseHistoryQuery,
  previousPage,
  rfc3339ToLocal,
  type HistoryFilters,
} from "./history";

const none: HistoryFilters = { namespace: "default", phase: "", selector: "", template: "", prefix: "", after: "", before: "" };

describe("history filters in the URL", () => {
  it("parses a query, the namespace defaulting and empty meaning all", () => {
    expect(parseHistoryQuery("", "default")).toEqual(none);
    expect(parseHistoryQuery("?namespace=", "default")).toEqual({ ...none, namespace: "" });
    expect(
      parseHistoryQuery("?namespace=ml&phase=Failed&selector=team%3Dml%2Cenv!%3Ddev&template=train&prefix=nightly-&after=2024-05-01T08%3A00%3A00Z&before=2024-05-02T00%3A00%3A00Z", "default"),
    ).toEqual({
      namespace: "ml",
      phase: "Failed",
      selector: "team=ml,env!=dev",
      template: "train",
      prefix: "nightly-",
      after: "2024-05-01T08:00:00Z",
      before: "2024-05-02T00:00:00Z",
    });
  });
  it("writes only what is set", () => {
    expect(historyQuery(none, "default")).toBe("");
    expect(historyQuery({ ...none, namespace: "" }, "default")).toBe("?namespace=");
    expect(historyQuery({ ...none, prefix: "hist-", phase: "Succeeded" }, "default")).toBe("?phase=Succeeded&prefix=hist-");
    // As typed: the form writes the URL while one types a selector's ", ".
    expect(historyQuery({ ...none, selector: "a=b, " }, "default")).toBe("?selector=a%3Db%2C+");
  });
  it("round-trips every filter", () => {
    const cases: HistoryFilters[] = [
      none,
      { ...none, namespace: "" },
      { namespace: "a b", phase: "Aborted", selector: "k, !j,x in (a,b) ", template: "ns/t", prefix: "p&q=", after: "2024-01-01T00:00:00Z", before: "2024-01-01T00:00:01Z" },
    ];
    for (const f of cases) expect(parseHistoryQuery(historyQuery(f, "default"), "default")).toEqual(f);
  });
  it("knows when something besides the namespace filters", () => {
    expect(isFiltered(none)).toBe(false);
    expect(isFiltered({ ...none, namespace: "ml" })).toBe(false);
    expect(isFiltered({ ...none, before: "2024-01-01T00:00:00Z" })).toBe(true);
  });
});

describe("the history request", () => {
  it("asks for archived runs with every filter", () => {
    const f = { namespace: "ml", phase: "Failed", selector: "a=b", template: "t", prefix: "x-", after: "2024-01-01T00:00:00Z", before: " " };
    expect(historyRequest(f, "tok", 50)).toEqual({
      namespace: "ml",
      labelSelector: "a=b",
      includeArchived: true,
      phase: "Failed",
      template: "t",
      namePrefix: "x-",
      startedAfter: "2024-01-01T00:00:00Z",
      startedBefore: "",
      limit: 50,
      pageToken: "tok",
    });
  });
});

describe("date-time inputs", () => {
  it("turns a local date-time into UTC RFC 3339 with whole seconds", () => {
    const local = "2024-05-01T10:30";
    const want = new Date(2024, 4, 1, 10, 30).toISOString().replace(".000Z", "Z");
    expect(localToRfc3339(local)).toBe(want);
    expect(localToRfc3339("2024-05-01T10:30:15.750")).toBe(new Date(2024, 4, 1, 10, 30, 15).toISOString().replace(".000Z", "Z"));
    expect(localToRfc3339("")).toBe("");
    expect(localToRfc3339("2024-05-01")).toBe("");
    expect(localToRfc3339("garbage")).toBe("");
  });
  it("shows an RFC 3339 time in local time, and round-trips", () => {
    const t = new Date(2024, 4, 1, 10, 30).toISOString();
    expect(rfc3339ToLocal(t)).toBe("2024-05-01T10:30");
    expect(rfc3339ToLocal(new Date(2024, 4, 1, 10, 30, 5).toISOString())).toBe("2024-05-01T10:30:05");
    expect(rfc3339ToLocal("")).toBe("");
    expect(rfc3339ToLocal("nope")).toBe("");
    for (const local of ["2024-05-01T10:30", "2023-12-31T23:59:59", "2024-02-29T00:00"]) {
      expect(rfc3339ToLocal(localToRfc3339(local))).toBe(local);
    }
  });
});

describe("page tokens", () => {
  it("pushes on Next and pops on Previous, never below the first page", () => {
    let p = FIRST_PAGE;
    expect(currentToken(p)).toBe("");
    p = nextPage(p, "t1");
    p = nextPage(p, "t2");
    expect(p).toEqual(["", "t1", "t2"]);
    expect(currentToken(p)).toBe("t2");
    // The last page has no next token: Next stays.
    expect(nextPage(p, "")).toBe(p);
    p = previousPage(p);
    expect(currentToken(p)).toBe("t1");
    p = previousPage(previousPage(p));
    expect(p).toEqual([""]);
  });
});

describe("node events", () => {
  const ev = (kind: string, nodeId: string, attempt: number, phase: string, at: string) => ({ kind, nodeId, attempt, phase, at, reason: "", message: "" });
  it("keeps a node's own and its attempts' events, oldest first", () => {
    const events = [
      ev("workflow", "", 1, "Running", "2024-01-01T00:00:00.000Z"),
      ev("node", "a", 1, "Running", "2024-01-01T00:00:01.000Z"),
      ev("task", "a", 1, "Running", "2024-01-01T00:00:01.000Z"),
      ev("node", "b", 1, "Running", "2024-01-01T00:00:01.500Z"),
      ev("task", "a", 2, "Succeeded", "2024-01-01T00:00:04.000Z"),
      ev("task", "a", 1, "Failed", "2024-01-01T00:00:02.000Z"),
    ];
    expect(nodeEvents(events, "a").map((e) => `${e.kind}:${e.attempt}:${e.phase}`)).toEqual([
      "node:1:Running",
      "task:1:Running",
      "task:1:Failed",
      "task:2:Succeeded",
    ]);
    expect(nodeEvents(events, "zzz")).toEqual([]);
  });
});
