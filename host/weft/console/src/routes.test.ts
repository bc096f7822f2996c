import { describe, expect, it } from "vitest";
import { historyHref, listHref, locksHref, nodeHref, parseRoute, workflowHref } from "./routes";

describe("routes", () => {
  it("parses the list with its filters", () => {
    expect(parseRoute("/", "")).toEqual({ page: "list", namespace: "default", selector: "" });
    expect(parseRoute("/", "?namespace=ml&selector=team%3Dml")).toEqual({ page: "list", namespace: "ml", selector: "team=ml" });
    // An empty namespace parameter lists all namespaces.
    expect(parseRoute("/", "?namespace=")).toEqual({ page: "list", namespace: "", selector: "" });
  });
  it("round-trips list filters", () => {
    for (const [ns, sel] of [["default", ""], ["", ""], ["ml", "a=b,c!=d"]]) {
      const href = listHref(ns, sel);
      const q = href.indexOf("?");
      expect(parseRoute("/", q < 0 ? "" : href.slice(q))).toEqual({ page: "list", namespace: ns, selector: sel });
    }
  });
  it("parses workflow and node pages", () => {
    expect(parseRoute("/workflows/default/wf-1", "")).toEqual({ page: "workflow", namespace: "default", name: "wf-1", node: null, expand: [] });
    expect(parseRoute("/workflows/default/wf-1/nodes/train", "")).toEqual({
      page: "workflow",
      namespace: "default",
      name: "wf-1",
      node: "train",
      expand: [],
    });
    expect(parseRoute("/workflows/default/wf-1/", "")).toMatchObject({ page: "workflow", name: "wf-1" });
  });
  it("round-trips odd node ids", () => {
    const id = "fan/out[3] a b";
    const href = nodeHref("ns", "wf", id);
    expect(href).toBe("/workflows/ns/wf/nodes/fan%2Fout%5B3%5D%20a%20b");
    expect(parseRoute(href, "")).toEqual({ page: "workflow", namespace: "ns", name: "wf", node: id, expand: [] });
    expect(workflowHref("a", "b")).toBe("/workflows/a/b");
  });
  it("keeps the open boxes in the query, on workflow and node links", () => {
    const href = workflowHref("ns", "wf", ["inner", "inner/deeper", "fan"]);
    expect(href).toBe("/workflows/ns/wf?expand=inner%2Cinner%2Fdeeper%2Cfan");
    const q = href.indexOf("?");
    expect(parseRoute(href.slice(0, q), href.slice(q))).toMatchObject({ page: "workflow", node: null, expand: ["inner", "inner/deeper", "fan"] });
    const node = nodeHref("ns", "wf", "train", ["inner"]);
    expect(node).toBe("/workflows/ns/wf/nodes/train?expand=inner");
    expect(parseRoute("/workflows/ns/wf/nodes/train", "?expand=inner,,inner")).toMatchObject({ node: "train", expand: ["inner"] });
    expect(workflowHref("ns", "wf", [])).toBe("/workflows/ns/wf");
  });
  it("names an archived execution exactly by its uid, beside the open boxes", () => {
    const href = workflowHref("ns", "wf", ["inner"], "0b5c-uid");
    expect(href).toBe("/workflows/ns/wf?expand=inner&uid=0b5c-uid");
    const q = href.indexOf("?");
    expect(parseRoute(href.slice(0, q), href.slice(q))).toEqual({
      page: "workflow",
      namespace: "ns",
      name: "wf",
      node: null,
      expand: ["inner"],
      uid: "0b5c-uid",
    });
    expect(nodeHref("ns", "wf", "a", [], "u1")).toBe("/workflows/ns/wf/nodes/a?uid=u1");
    expect(parseRoute("/workflows/ns/wf/nodes/a", "?uid=u1")).toMatchObject({ node: "a", uid: "u1" });
    expect(parseRoute("/workflows/ns/wf", "?uid=")).not.toHaveProperty("uid");
  });
  it("parses the history page with its filters, and round-trips them", () => {
    expect(parseRoute("/history", "")).toEqual({
      page: "history",
      filters: { namespace: "default", phase: "", selector: "", template: "", prefix: "", after: "", before: "" },
    });
    const filters = { namespace: "", phase: "Succeeded", selector: "a=b", template: "", prefix: "hist-", after: "2024-01-01T00:00:00Z", before: "" };
    const href = historyHref(filters);
    expect(href).toBe("/history?namespace=&phase=Succeeded&selector=a%3Db&prefix=hist-&after=2024-01-01T00%3A00%3A00Z");
    const q = href.indexOf("?");
    expect(parseRoute(href.slice(0, q), href.slice(q))).toEqual({ page: "history", filters });
  });
  it("parses the locks page with its namespace, and round-trips it", () => {
    expect(parseRoute("/locks", "")).toEqual({ page: "locks", namespace: "default" });
    for (const ns of ["default", "ml", "", "a b"]) {
      const href = locksHref(ns);
      const q = href.indexOf("?");
      expect(parseRoute(q < 0 ? href : href.slice(0, q), q < 0 ? "" : href.slice(q))).toEqual({ page: "locks", namespace: ns });
    }
    expect(locksHref("default")).toBe("/locks");
    expect(locksHref("ml")).toBe("/locks?namespace=ml");
  });
  it("parses plugins and rejects the rest", () => {
    expect(parseRoute("/plugins", "")).toEqual({ page: "plugins" });
    expect(parseRoute("/workflows/x", "").page).toBe("notfound");
    expect(parseRoute("/workflows/x/y/nodes", "").page).toBe("notfound");
    expect(parseRoute("/nope", "").page).toBe("notfound");
    expect(parseRoute("/workflows/%E0%A4%A/y", "").page).toBe("notfound");
  });
});
