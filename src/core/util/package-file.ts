import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The packages that ship the service's programs: the full one and the lean one. */
const PACKAGES = new Set(['headless-run-webhook', 'headless-run-webhook-core']);

/** A file this package built into `dist/` (a command the service runs), found up from this module; undefined where it is not built. */
export function builtFile(name: string): string | undefined {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && PACKAGES.has((JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name ?? '')) {
      const file = join(dir, 'dist', name);
      return existsSync(file) ? file : undefined;
    }
    if (dirname(dir) === dir) return undefined;
  }
}
