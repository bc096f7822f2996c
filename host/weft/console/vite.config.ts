/// <reference types="vitest/config" />
import { defineConfig } from "vite";

// The Rust host serves dist/ at the origin root and answers index.html for
// every other GET (History-API routes), so assets are addressed from "/".
export default defineConfig({
  base: "/",
  // React's automatic JSX runtime through Vite's built-in transform: no
  // framework plugin needed (there is no dev-time fast refresh, on purpose).
  oxc: { jsx: { runtime: "automatic" } },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    // No source maps in the shipped bundle: nothing points outside the origin.
    sourcemap: false,
    target: "es2022",
    // Everything is inlined or hashed under /assets; no external URLs.
    assetsInlineLimit: 4096,
  },
  worker: { format: "es" },
  // `npm run dev`: the page's gRPC-Web calls go to a running Weft admin
  // server (default port 8081; WEFT_ADMIN=http://host:port to change), and
  // so do the sign-in pages, keeping the dev server's Host so the session
  // cookie and the callback URL are the dev server's (the provider must
  // allow http://localhost:5173/auth/callback, or set redirectUrl).
  server: {
    proxy: {
      "/weft.admin.v1.AdminService": { target: process.env.WEFT_ADMIN ?? "http://127.0.0.1:8081", changeOrigin: true },
      "/auth/": { target: process.env.WEFT_ADMIN ?? "http://127.0.0.1:8081", changeOrigin: false },
    },
  },
  test: {
    environment: "node",
    include: ["src/**/*.test.{ts,tsx}"],
  },
});
