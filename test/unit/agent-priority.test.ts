import { existsSync, readFileSync } from 'node:fs';
import { getPriority } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { type SpawnedProcess, createExecaSpawner } from '../../src/core/process/spawner';
import { waitFor } from '../helpers/wait';

const started: SpawnedProcess[] = [];
afterEach(async () => {
  for (const child of started.splice(0)) {
    child.kill('SIGKILL');
    await child.exit;
  }
});

/** Starts `sh -c script` through the spawner; its stdout lines are collected. */
async function start(nice: number | undefined, script: string) {
  const lines: string[] = [];
  const child = await createExecaSpawner(nice === undefined ? {} : { nice })({
    command: 'sh',
    args: ['-c', script],
    cwd: process.cwd(),
    env: { PATH: process.env.PATH ?? '' },
    onStdoutLine: (line) => lines.push(line),
  });
  started.push(child);
  return { child, lines };
}

/** The nice value of a process's scheduling group, where the kernel groups by session. */
const autogroupNice = (pid: number | 'self') => Number(/nice (-?\d+)/.exec(readFileSync(`/proc/${pid}/autogroup`, 'utf8'))?.[1]);
const autogroups = existsSync('/proc/self/autogroup');
/** 10 below the test's own (which `nice npm test` raises), at most 19. */
const below = (own: number) => Math.min(19, own + 10);

describe('agents run below the service', () => {
  it('an agent runs 10 nice levels below by default, and where the kernel weighs CPU by session, so does its whole session, what it starts later included', async () => {
    // The agent starts a process of its own only when signalled, so that it surely does so after the spawner returned.
    const { child, lines } = await start(undefined, 'trap "sleep 30 & echo \\$!; wait" USR1; echo ready; while :; do sleep 1; done');
    expect(getPriority(child.pid)).toBe(below(getPriority()));
    if (!autogroups) return;
    expect(autogroupNice(child.pid)).toBe(below(autogroupNice('self')));
    expect(autogroupNice(child.pid)).not.toBe(autogroupNice('self'));
    await waitFor(() => lines.includes('ready'));
    process.kill(child.pid, 'SIGUSR1');
    await waitFor(() => lines.length > 1);
    expect(autogroupNice(Number(lines[1]))).toBe(autogroupNice(child.pid));
  });

  it('with nice 0 an agent runs at the service own priority', async () => {
    const { child } = await start(0, 'sleep 30');
    expect(getPriority(child.pid)).toBe(getPriority());
    if (autogroups) expect(autogroupNice(child.pid)).toBe(autogroupNice('self'));
  });
});
