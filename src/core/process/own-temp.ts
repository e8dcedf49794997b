import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { processAlive } from './alive';

/**
 * A new folder of this process's in the temporary folder, named `<prefix><pid>-…`. What a service
 * killed with kill -9 left under the same prefix (its pid gone, the folder this user's) is removed
 * first: nothing else would ever remove it.
 */
export function ownTempFolder(prefix: string): string {
  for (const name of readdirSync(tmpdir())) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(/^(\d+)-/.exec(name.slice(prefix.length))?.[1]);
    const dir = join(tmpdir(), name);
    if (!pid || pid === process.pid || processAlive(pid) || statSync(dir, { throwIfNoEntry: false })?.uid !== process.getuid?.()) continue;
    rmSync(dir, { recursive: true, force: true });
  }
  return mkdtempSync(join(tmpdir(), `${prefix}${process.pid}-`));
}
