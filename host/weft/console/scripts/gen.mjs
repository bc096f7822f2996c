// Generates src/gen/ from the admin proto (buf + protoc-gen-es, see
// buf.gen.yaml), rewriting only the files whose content changed.
//
// Why not `buf generate` straight into src/: the Rust build script watches
// console/src (cargo rerun-if-changed), and files rewritten on every build
// would make cargo rerun it, and so rebuild the console, on every build.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const target = path.join(root, "src", "gen");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "weft-console-gen-"));

function files(dir, base = dir) {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? files(p, base) : [path.relative(base, p)];
  });
}

try {
  const buf = path.join(root, "node_modules", ".bin", process.platform === "win32" ? "buf.cmd" : "buf");
  // `-o tmp`: buf.gen.yaml's `out: src/gen` lands under tmp.
  // protoc-gen-es is found on PATH, as under `npm run`.
  const env = { ...process.env, PATH: `${path.dirname(buf)}${path.delimiter}${process.env.PATH ?? ""}` };
  const r = spawnSync(buf, ["generate", "-o", tmp], { cwd: root, stdio: "inherit", env });
  if (r.status !== 0) process.exit(r.status ?? 1);
  const fresh = path.join(tmp, "src", "gen");
  const want = new Set(files(fresh));
  let written = 0;
  for (const rel of want) {
    const data = fs.readFileSync(path.join(fresh, rel));
    const dest = path.join(target, rel);
    if (fs.existsSync(dest) && fs.readFileSync(dest).equals(data)) continue;
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    fs.writeFileSync(dest, data);
    written++;
  }
  for (const rel of files(target)) {
    if (!want.has(rel)) fs.rmSync(path.join(target, rel));
  }
  console.log(`src/gen: ${want.size} file(s), ${written} rewritten`);
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
