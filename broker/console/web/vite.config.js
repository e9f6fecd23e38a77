import { defineConfig } from 'vite';

// The console is served at /console/ with hash routing, so any path under
// it answers index.html: assets must be addressed absolutely.
export default defineConfig({
  base: '/console/',
  // Vite 8 compiles JSX with its built-in Oxc transformer (esbuild's
  // successor in Vite), so no framework plugin is needed.
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: '../dist',
    emptyOutDir: true,
    target: 'es2020',
    // Every browser the console supports has modulepreload.
    modulePreload: { polyfill: false },
  },
});
