import { describe, expect, it } from "vitest";
import { formatBytes, nodeArtifacts } from "./text";

describe("formatBytes", () => {
  it("reads as people write sizes", () => {
    expect(formatBytes(812)).toBe("812 B");
    expect(formatBytes(1536)).toBe("1.5 KiB");
    expect(formatBytes(200 * 1024 * 1024)).toBe("200 MiB");
    expect(formatBytes(1024)).toBe("1 KiB");
  });
});

describe("nodeArtifacts", () => {
  it("lists outputs.artifacts by name and ignores the rest", () => {
    const outputs = JSON.stringify({
      n: 1,
      artifacts: {
        model: { key: "ns/wf/uid/train/0/model", digest: "sha256:ab", size: 5, kind: "directory" },
        data: { key: "ns/wf/uid/train/0/data", digest: "sha256:cd", size: 7, kind: "file" },
      },
    });
    expect(nodeArtifacts(outputs).map((a) => [a.name, a.kind, a.size])).toEqual([
      ["data", "file", 7],
      ["model", "directory", 5],
    ]);
    expect(nodeArtifacts("")).toEqual([]);
    expect(nodeArtifacts('{"artifacts": 3}')).toEqual([]);
  });
});
