import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** Every file under `dir` as text (a store's database, its WAL and journal, logs): to look for what must never be written. */
export function everything(dir: string): string {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((name) => join(dir, name))
    .filter((path) => statSync(path).isFile())
    .map((path) => readFileSync(path).toString('latin1'))
    .join('\n');
}
