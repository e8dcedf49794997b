import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { probe } from '../../src/core/agents/preflight';

const dir = mkdtempSync(join(tmpdir(), 'hrw-probe-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('probing an agent CLI', () => {
  it('one slower than the first limit (a busy machine) is asked again with a longer one, and answers', async () => {
    const slow = join(dir, 'slow-cli');
    const starts = join(dir, 'starts');
    writeFileSync(slow, `#!/bin/sh\necho started >> '${starts}'\nsleep 1\necho "slow-cli 1.2.3"\n`);
    chmodSync(slow, 0o755);
    // Limits of their own (the service's are 10 s, then 60 s): the first always runs out, the second is ample.
    expect(await probe(slow, ['--version'], { PATH: process.env.PATH }, [300, 60_000])).toEqual({ output: 'slow-cli 1.2.3\n', timedOut: false });
    expect(readFileSync(starts, 'utf8')).toBe('started\nstarted\n');
  }, 600_000);
});
