// check-dist proves ../dist was built from the checked-in source: it
// builds again into a temporary directory and compares the two trees byte
// for byte. Exit 1 names every file that differs, is missing or is extra.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';

const web = fileURLToPath(new URL('..', import.meta.url));
const dist = join(web, '..', 'dist');

function files(dir) {
  const out = new Map();
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const path = join(d, e.name);
      if (e.isDirectory()) walk(path);
      else out.set(relative(dir, path), readFileSync(path));
    }
  };
  walk(dir);
  return out;
}

const fresh = mkdtempSync(join(tmpdir(), 'magnetar-console-'));
try {
  await build({ root: web, logLevel: 'warn', build: { outDir: fresh, emptyOutDir: true } });
  const want = files(fresh);
  let have;
  try {
    have = files(dist);
  } catch {
    have = new Map();
  }
  const problems = [];
  for (const [name, bytes] of want) {
    if (!have.has(name)) problems.push(`missing from dist: ${name}`);
    else if (!bytes.equals(have.get(name))) problems.push(`differs: ${name}`);
  }
  for (const name of have.keys()) if (!want.has(name)) problems.push(`not built from source: ${name}`);
  if (problems.length) {
    console.error(`broker/console/dist does not match a fresh build (run npm run build):\n  ${problems.join('\n  ')}`);
    process.exitCode = 1;
  } else {
    console.log(`broker/console/dist matches a fresh build (${want.size} files)`);
  }
} finally {
  rmSync(fresh, { recursive: true, force: true });
}
