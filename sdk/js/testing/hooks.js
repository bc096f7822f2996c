// Node module-resolution hooks for native tests:
//   weft:plugin/<interface>@<version> -> host.js (the stand-ins),
//   weft-plugin-sdk                   -> the SDK (as build.sh resolves it),
//   weft-plugin-sdk/build             -> build.js (not in a component),
//   weft-plugin-sdk/wasi-http         -> wasi-http.js (no wasi:http natively).
const HOST = new URL('./host.js', import.meta.url).href;
const SDK = new URL('../weft-plugin.js', import.meta.url).href;
const BUILD = new URL('./build.js', import.meta.url).href;
const WASI_HTTP = new URL('./wasi-http.js', import.meta.url).href;

export async function resolve(specifier, context, next) {
  const m = /^weft:plugin\/(log|clock|state)@0\.[12]\.\d+$/.exec(specifier);
  if (m) return { url: `${HOST}?${m[1]}`, shortCircuit: true };
  if (specifier === 'weft-plugin-sdk') return { url: SDK, shortCircuit: true };
  if (specifier === 'weft-plugin-sdk/build') return { url: BUILD, shortCircuit: true };
  if (specifier === 'weft-plugin-sdk/wasi-http') return { url: WASI_HTTP, shortCircuit: true };
  return next(specifier, context);
}
