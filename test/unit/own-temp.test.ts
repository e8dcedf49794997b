import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ownTempFolder } from '../../src/core/process/own-temp';

/** What a service killed with kill -9 leaves in the temporary folder (a sandbox's runs, the headless-inbox launcher) is removed by the next. */
const PREFIX = `hrw-own-temp-test-${process.pid}-`;
const made: string[] = [];
afterAll(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

describe('a temporary folder of this process', () => {
  it('removes what a dead process of this user left under its prefix, never a live one’s or its own', () => {
    // A pid that has exited: the process ran and is gone.
    const gone = spawnSync('sh', ['-c', 'echo $$'], { encoding: 'utf8' }).stdout.trim();
    const left = join(tmpdir(), `${PREFIX}${gone}-left`);
    const live = join(tmpdir(), `${PREFIX}1-init`);
    const mine = join(tmpdir(), `${PREFIX}${process.pid}-mine`);
    for (const dir of [left, live, mine]) mkdirSync(dir, { recursive: true });
    made.push(left, live, mine);
    const fresh = ownTempFolder(PREFIX);
    made.push(fresh);
    expect(existsSync(left)).toBe(false);
    expect(existsSync(live)).toBe(true);
    expect(existsSync(mine)).toBe(true);
    expect(fresh.startsWith(join(tmpdir(), `${PREFIX}${process.pid}-`))).toBe(true);
  });
});
