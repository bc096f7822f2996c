// Bundles a plugin's entry module with everything it imports (relative
// modules, npm packages, the SDK as `weft-plugin-sdk`) into one ES module
// for ComponentizeJS. The host's imports (`weft:plugin/...`) stay imports.
// `weft-plugin-sdk/build` is generated: it tells the SDK that it runs in
// the component and hands it the task.json beside the entry (or null), the
// sample its build-time warm-up calls the plugin with.
//
//   node bundle.mjs <entry.js> <out.js>
import { rolldown } from 'rolldown';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const [entry, out] = process.argv.slice(2);
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

const bundle = await rolldown({
  input: entry,
  platform: 'neutral',
  external: [/^weft:/],
  plugins: [build],
  resolve: { alias: { 'weft-plugin-sdk': sdk } },
  treeshake: false, // keep every export of the entry, whatever the tree-shaker thinks
  // No `// <module path>` comments: those paths are relative to the working
  // directory, and the bundle ends up in the component (reproducible builds).
  experimental: { attachDebugInfo: 'none' },
});
await bundle.write({ file: out, format: 'esm', sourcemap: false });
await bundle.close();
