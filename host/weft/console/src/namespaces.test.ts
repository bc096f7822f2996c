// The namespace picker's choices (namespaces.ts) and its options' markup.
import { Code, ConnectError } from "@connectrpc/connect";
import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { NamespacePicker } from "./components/NamespacePicker";
import {
  createNamespaceStore,
  defaultNamespace,
  failedState,
  listedState,
  pickerOptions,
  resolveNamespace,
  type Namespaces,
} from "./namespaces";

const listing = (...namespaces: string[]): Namespaces => ({ state: "listed", namespaces });
const loading: Namespaces = { state: "loading" };
const unimplemented: Namespaces = { state: "failed", text: "UNIMPLEMENTED", retry: false };

describe("the top bar's namespace", () => {
  it("is default when allowed, else the first allowed", () => {
    expect(defaultNamespace(["default", "team-a"])).toBe("default");
    expect(defaultNamespace(["team-a", "default"])).toBe("default");
    expect(defaultNamespace(["team-a", "team-b"])).toBe("team-a");
  });
  it("stays default when nothing is known or nothing allowed", () => {
    expect(defaultNamespace(null)).toBe("default");
    expect(defaultNamespace([])).toBe("default");
  });
});

describe("the page's namespace", () => {
  it("turns the implicit default into the first allowed one", () => {
    expect(resolveNamespace("default", listing("team-a", "team-b"), false)).toBe("team-a");
    expect(resolveNamespace("default", listing("default", "team-a"), false)).toBe("default");
    expect(resolveNamespace("default", listing(), false)).toBe("default");
  });
  it("waits for the list, for a while", () => {
    expect(resolveNamespace("default", loading, false)).toBeNull();
    expect(resolveNamespace("default", loading, true)).toBe("default");
  });
  it("keeps a namespace named in the URL, and everything when the server cannot list them", () => {
    expect(resolveNamespace("team-b", listing("team-a"), false)).toBe("team-b");
    expect(resolveNamespace("", listing("team-a"), false)).toBe("");
    expect(resolveNamespace("team-b", loading, false)).toBe("team-b");
    expect(resolveNamespace("default", unimplemented, false)).toBe("default");
  });
});

describe("the picker's options", () => {
  it("are exactly the listed namespaces, in order", () => {
    expect(pickerOptions(["team-a", "team-b"], "team-b", "all namespaces")).toEqual([
      { value: "team-a", label: "team-a", listed: true },
      { value: "team-b", label: "team-b", listed: true },
    ]);
  });
  it("show the page's namespace first when it is not listed", () => {
    expect(pickerOptions(["team-a"], "other", "all namespaces")).toEqual([
      { value: "other", label: "other (not listed)", listed: false },
      { value: "team-a", label: "team-a", listed: true },
    ]);
    expect(pickerOptions(["team-a"], "", "all namespaces")[0]).toEqual({ value: "", label: "all namespaces", listed: false });
  });
  it("are the page's namespace alone while listing", () => {
    expect(pickerOptions(null, "default", "all namespaces")).toEqual([{ value: "default", label: "default", listed: false }]);
  });
  it("render as a select with the page's namespace selected", () => {
    const html = renderToStaticMarkup(
      createElement(NamespacePicker, { value: "team-b", namespaces: ["team-a", "team-b"], onChange: () => undefined, emptyLabel: "all" }),
    );
    expect(html).toContain('data-testid="namespace-picker"');
    const options = [...html.matchAll(/<option value="([^"]*)"([^>]*)>([^<]*)<\/option>/g)].map((m) => [m[1], m[3], m[2].includes("selected")]);
    expect(options).toEqual([
      ["team-a", "team-a", false],
      ["team-b", "team-b", true],
    ]);
    expect(html).not.toContain("disabled");
  });
});

describe("listing the namespaces", () => {
  it("keeps the server's order without blanks and repeats", () => {
    expect(listedState(["team-b", "", "team-a", "team-b"])).toEqual(listing("team-b", "team-a"));
  });
  it("gives up for good on an older server only", () => {
    expect(failedState(new ConnectError("no such method", Code.Unimplemented))).toMatchObject({ state: "failed", retry: false });
    expect(failedState(new ConnectError("down", Code.Unavailable))).toMatchObject({ state: "failed", retry: true });
  });
  it("asks once, and again after a failure that may pass", async () => {
    let calls = 0;
    const answers: Array<() => Promise<string[]>> = [
      () => Promise.reject(new ConnectError("down", Code.Unavailable)),
      () => Promise.resolve(["team-a"]),
    ];
    const store = createNamespaceStore(() => answers[calls++]());
    const settled = () => new Promise<void>((resolve) => {
      const off = store.subscribe(() => {
        off();
        resolve();
      });
    });
    let next = settled();
    store.load();
    store.load(); // under way: not asked twice
    await next;
    expect(calls).toBe(1);
    expect(store.get()).toMatchObject({ state: "failed", retry: true });
    next = settled();
    store.load();
    await next;
    expect(store.get()).toEqual(listing("team-a"));
    store.load();
    expect(calls).toBe(2);
  });
  it("does not ask an older server again", async () => {
    let calls = 0;
    const store = createNamespaceStore(() => {
      calls++;
      return Promise.reject(new ConnectError("unknown method ListNamespaces", Code.Unimplemented));
    });
    store.load();
    await new Promise((r) => setTimeout(r, 0));
    expect(store.get()).toMatchObject({ state: "failed", retry: false });
    store.load();
    expect(calls).toBe(1);
  });
});
