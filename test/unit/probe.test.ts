import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { probe } from '../../src/core/agents/preflight';

const dir = mkdtempSync(join(tmpdir(), 'hrw-probe-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('probing an agent CLI', () => {
  it('one slower than the first limit (a busy machine) is asked again with a longer one, and answers', async () => {
    const slow = join(dir, 'slow-cli');
    writeFileSync(slow, '#!/bin/sh\nsleep 11\necho "slow-cli 1.2.3"\n');
    chmodSync(slow, 0o755);
    expect(await probe(slow, ['--version'], { PATH: process.env.PATH })).toEqual({ output: 'slow-cli 1.2.3\n', timedOut: false });
  }, 600_000);
});
