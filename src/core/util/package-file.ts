import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** A file this package built into `dist/` (a command the service runs), found up from this module; undefined where it is not built. */
export function builtFile(name: string): string | undefined {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'headless-run-webhook') {
      const file = join(dir, 'dist', name);
      return existsSync(file) ? file : undefined;
    }
    if (dirname(dir) === dir) return undefined;
  }
}
