// Bundles a plugin's entry module with everything it imports (relative
// modules, npm packages, the SDK as `weft-plugin-sdk`) into one ES module
// for ComponentizeJS. The host's imports (`weft:plugin/...`) stay imports.
// `weft-plugin-sdk/build` is generated: it tells the SDK that it runs in
// the component and hands it the task.json beside the entry (or null), the
// sample its build-time warm-up calls the plugin with.
//
// The third argument is the component's world (default k8s-task-plugin).
// For webapi-task-plugin, of `weft:plugin@0.2.0`, the SDK's imports of the
// host's interfaces (`weft:plugin/log@0.1.0`, ...) are rewritten to 0.2.0
// (every interface the SDK uses is the same in both), and
// `weft-plugin-sdk/wasi-http`, what the SDK's `http` client is built on,
// re-exports the world's `wasi:http` imports; in the other worlds it
// exports nothing usable (they may not import wasi:http).
//
//   node bundle.mjs <entry.js> <out.js> [world]
import { rolldown } from 'rolldown';
import { appendFileSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const [entry, out, world = 'k8s-task-plugin'] = process.argv.slice(2);
const webapi = world === 'webapi-task-plugin';
const version = webapi ? '0.2.0' : undefined;
if (!entry || !out) {
  console.error('usage: node bundle.mjs <entry.js> <out.js>');
  process.exit(64);
}
const sdk = fileURLToPath(new URL('./weft-plugin.js', import.meta.url));

let sampleTask = null;
const taskFile = join(dirname(entry), 'task.json');
try {
  sampleTask = JSON.parse(readFileSync(taskFile, 'utf8'));
} catch (e) {
  if (e.code !== 'ENOENT') console.error(`warning: ${taskFile}: ${e.message}: the warm-up uses an empty task`);
}
const BUILD = '\0weft-plugin-sdk/build';
const build = {
  name: 'weft-plugin-sdk-build',
  resolveId: (id) => (id === 'weft-plugin-sdk/build' ? BUILD : null),
  load: (id) =>
    id === BUILD
      ? `export const inComponent = true;\nexport const sampleTask = ${JSON.stringify(sampleTask)};\n`
      : null,
};

// The host's interfaces stay imports, of the world's package version.
const host = {
  name: 'weft-plugin-host',
  resolveId(id) {
    if (id.startsWith('wasi:')) return { id, external: true };
    if (!id.startsWith('weft:')) return null;
    const m = /^(weft:plugin\/[a-z-]+)@0\.1\.0$/.exec(id);
    return { id: version && m ? `${m[1]}@${version}` : id, external: true };
  },
};

const WASI_HTTP = '\0weft-plugin-sdk/wasi-http';
const wasiHttp = {
  name: 'weft-plugin-sdk-wasi-http',
  resolveId: (id) => (id === 'weft-plugin-sdk/wasi-http' ? WASI_HTTP : null),
  load: (id) =>
    id !== WASI_HTTP
      ? null
      : webapi
        ? "export const available = true;\n" +
          "export { handle } from 'wasi:http/outgoing-handler@0.2.12';\n" +
          "export { Fields, OutgoingRequest, OutgoingBody } from 'wasi:http/types@0.2.12';\n"
        : 'export const available = false;\nexport const handle = undefined, Fields = undefined, OutgoingRequest = undefined, OutgoingBody = undefined;\n',
};

const bundle = await rolldown({
  input: entry,
  platform: 'neutral',
  plugins: [host, build, wasiHttp],
  resolve: { alias: { 'weft-plugin-sdk': sdk } },
  treeshake: false, // keep every export of the entry, whatever the tree-shaker thinks
  // No `// <module path>` comments: those paths are relative to the working
  // directory, and the bundle ends up in the component (reproducible builds).
  experimental: { attachDebugInfo: 'none' },
});
await bundle.write({ file: out, format: 'esm', sourcemap: false });
await bundle.close();
// The SDK's build-time warm-up runs here, after the entry module's last
// statement, in both engines (see runWarmUps in weft-plugin.js).
appendFileSync(out, "\nglobalThis[Symbol.for('weft-plugin-sdk.warm-up')]?.();\n");
