import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'vitest';
import { runCli } from './daemon';

/** The agent CLIs this repository installs for its tests. */
export const REAL_BIN = resolve(__dirname, '../../node_modules/.bin');
/** A credential doctor must name but never show. */
export const SECRET = 'sk-ant-never-shown-123';

const dirs: string[] = [];

/** A temporary folder, removed by `removeDirs`. */
export function dir(): string {
  const d = mkdtempSync(join(tmpdir(), 'hrw-doctor-'));
  dirs.push(d);
  return d;
}

export function removeDirs(): void {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
}

/** `headless-run-webhook doctor` in a folder of its own with `config`; it never shows SECRET. */
export async function doctor(config: Record<string, unknown>, args: string[] = []) {
  const cwd = dir();
  writeFileSync(join(cwd, 'headless.config.json'), JSON.stringify(config));
  const r = await runCli(['doctor', ...args], { cwd, env: { ANTHROPIC_API_KEY: SECRET }, timeoutMs: 480_000 });
  expect(`${r.stdout}${r.stderr}`).not.toContain(SECRET);
  return r;
}
