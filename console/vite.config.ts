/**
 * The web console's build: a single-page app in console/dist (index.html and hashed assets/), which
 * the service serves at `/`. Preact renders it; `react` resolves to preact/compat so that React
 * libraries (TanStack Query) run on it; the SDK comes from its source, so the console is built
 * (and type-checked) against the contract of this commit.
 */
import { defineConfig } from 'vite';

const here = (path: string) => new URL(path, import.meta.url).pathname;

export default defineConfig({
  root: here('.'),
  base: '/',
  publicDir: false,
  resolve: {
    alias: [
      { find: /^react-dom(\/.*)?$/, replacement: 'preact/compat' },
      { find: /^react\/jsx-runtime$/, replacement: 'preact/jsx-runtime' },
      { find: /^react$/, replacement: 'preact/compat' },
      { find: /^@signalboard\/sdk$/, replacement: here('../sdk/src/index.ts') },
    ],
  },
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: here('dist'),
    emptyOutDir: true,
    target: 'es2022',
    // No inline script or style may reach the page (the service's CSP: script-src 'self'; style-src 'self').
    assetsInlineLimit: 0,
    sourcemap: false,
    reportCompressedSize: false,
    rolldownOptions: {
      // TanStack Query marks its modules "use client" (for React Server Components), which means nothing here.
      onwarn(warning, warn) {
        if (warning.code !== 'MODULE_LEVEL_DIRECTIVE') warn(warning);
      },
    },
  },
  server: {
    // `npx vite --config console/vite.config.ts` with the service on :3000: the API through the dev server.
    proxy: { '/v1': 'http://localhost:3000', '/cdn': 'http://localhost:3000' },
  },
});
