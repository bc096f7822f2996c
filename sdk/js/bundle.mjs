// Bundles a plugin's entry module with everything it imports (relative
// modules, npm packages, the SDK as `weft-plugin-sdk`) into one ES module
// for ComponentizeJS. The host's imports (`weft:plugin/...`) stay imports.
//
//   node bundle.mjs <entry.js> <out.js>
import { rolldown } from 'rolldown';
import { fileURLToPath } from 'node:url';

const [entry, out] = process.argv.slice(2);
if (!entry || !out) {
  console.error('usage: node bundle.mjs <entry.js> <out.js>');
  process.exit(64);
}
const sdk = fileURLToPath(new URL('./weft-plugin.js', import.meta.url));
const bundle = await rolldown({
  input: entry,
  platform: 'neutral',
  external: [/^weft:/],
  resolve: { alias: { 'weft-plugin-sdk': sdk } },
  treeshake: false, // keep every export of the entry, whatever the tree-shaker thinks
  // No `// <module path>` comments: those paths are relative to the working
  // directory, and the bundle ends up in the component (reproducible builds).
  experimental: { attachDebugInfo: 'none' },
});
await bundle.write({ file: out, format: 'esm', sourcemap: false });
await bundle.close();
