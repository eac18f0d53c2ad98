/**
 * The web console's build: a single-page app in console/dist (index.html and hashed assets/), which
 * the service serves at `/`. Preact renders it; `react` resolves to preact/compat so that React
 * libraries (TanStack Query) run on it; the SDK comes from its source, so the console is built
 * (and type-checked) against the contract of this commit.
 */
import { defineConfig, type Plugin } from 'vite';

const here = (path: string) => new URL(path, import.meta.url).pathname;

/**
 * A `modulepreload` in index.html for the project pages' chunk, the page most visits open (a
 * project's live feed): the browser fetches it with the shell's own files instead of after the
 * shell has run, one round trip less before a project's first events. The login page pays about
 * 4 KB (gzipped) for it.
 */
function preloadProjectPages(): Plugin {
  return {
    name: 'signalboard:preload-project-pages',
    transformIndexHtml: {
      order: 'post',
      handler(html, { bundle }) {
        const chunk = Object.values(bundle ?? {}).find(
          (output) => output.type === 'chunk' && output.facadeModuleId?.endsWith('/src/pages/project.tsx'),
        );
        if (chunk?.type !== 'chunk') throw new Error('the project pages chunk (src/pages/project.tsx) is not in the build');
        // The chunk and what it imports, but for the files the page already loads.
        return [chunk.fileName, ...chunk.imports]
          .filter((file) => !html.includes(`/${file}"`))
          .map((file) => ({
            tag: 'link',
            attrs: { rel: 'modulepreload', crossorigin: true, href: `/${file}` },
            injectTo: 'head' as const,
          }));
      },
    },
  };
}

export default defineConfig({
  plugins: [preloadProjectPages()],
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
