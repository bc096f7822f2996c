import { describe, expect, it } from "vitest";
import { closesPanel, isTextEntry, type KeyPress } from "./keys";

const press = (key: string, more: Partial<KeyPress> = {}): KeyPress => ({
  key,
  defaultPrevented: false,
  altKey: false,
  ctrlKey: false,
  metaKey: false,
  shiftKey: false,
  ...more,
});

describe("text entry", () => {
  it("knows the fields one types into", () => {
    expect(isTextEntry({ tagName: "INPUT", type: "text" })).toBe(true);
    expect(isTextEntry({ tagName: "input", type: "" })).toBe(true);
    expect(isTextEntry({ tagName: "TEXTAREA" })).toBe(true);
    expect(isTextEntry({ tagName: "DIV", isContentEditable: true })).toBe(true);
    expect(isTextEntry({ tagName: "INPUT", type: "checkbox" })).toBe(false);
    expect(isTextEntry({ tagName: "BUTTON", type: "button" })).toBe(false);
    expect(isTextEntry({ tagName: "g" })).toBe(false);
    expect(isTextEntry(null)).toBe(false);
  });
});

describe("Escape closes the node panel", () => {
  it("closes on a plain Escape from a box, a button or the page", () => {
    expect(closesPanel(press("Escape"), { tagName: "g" })).toBe(true);
    expect(closesPanel(press("Escape"), { tagName: "BUTTON", type: "button" })).toBe(true);
    expect(closesPanel(press("Escape"), null)).toBe(true);
  });
  it("leaves other keys, handled keys, modified keys and text fields alone", () => {
    expect(closesPanel(press("Enter"), null)).toBe(false);
    expect(closesPanel(press("Esc"), null)).toBe(false);
    expect(closesPanel(press("Escape", { defaultPrevented: true }), null)).toBe(false);
    expect(closesPanel(press("Escape", { isComposing: true }), null)).toBe(false);
    expect(closesPanel(press("Escape", { shiftKey: true }), null)).toBe(false);
    expect(closesPanel(press("Escape", { ctrlKey: true }), null)).toBe(false);
    expect(closesPanel(press("Escape"), { tagName: "INPUT", type: "text" })).toBe(false);
  });
});
