import { describe, expect, it } from "vitest";
import { elapsed, formatDuration, parseTime } from "./time";

describe("time", () => {
  it("parses RFC 3339 and empty times", () => {
    expect(parseTime("2024-05-01T10:00:00Z")).toBe(Date.UTC(2024, 4, 1, 10));
    expect(parseTime("")).toBeNull();
    expect(parseTime("garbage")).toBeNull();
  });
  it("measures to now while running", () => {
    const start = "2024-05-01T10:00:00Z";
    expect(elapsed(start, "2024-05-01T10:01:30Z", 0)).toBe(90_000);
    expect(elapsed(start, "", Date.UTC(2024, 4, 1, 10, 0, 5))).toBe(5000);
    expect(elapsed("", "", 0)).toBeNull();
  });
  it("formats durations", () => {
    expect(formatDuration(null)).toBe("");
    expect(formatDuration(850)).toBe("850ms");
    expect(formatDuration(12_400)).toBe("12s");
    expect(formatDuration(184_000)).toBe("3m 4s");
    expect(formatDuration(3_720_000)).toBe("1h 2m");
    expect(formatDuration(2 * 86_400_000 + 3 * 3_600_000)).toBe("2d 3h");
  });
});
