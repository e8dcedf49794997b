import { existsSync, readFileSync } from 'node:fs';
import { getPriority } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { levelsBelow } from '../../src/core/process/priority';
import { type SpawnedProcess, type Spawner, createExecaSpawner } from '../../src/core/process/spawner';
import { waitFor } from '../helpers/wait';

const started: SpawnedProcess[] = [];
afterEach(async () => {
  for (const child of started.splice(0)) {
    child.kill('SIGKILL');
    await child.exit;
  }
});

/** Starts `sh -c script` through `spawner`; its stdout lines are collected. */
async function start(spawner: Spawner, script: string) {
  const lines: string[] = [];
  const child = await spawner({
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
/** `levels` below the test's own (which `nice npm test` raises), at most 19. */
const below = (own: number, levels: number) => Math.min(19, own + levels);

describe('agents, together, weigh about what the service does', () => {
  it('the level grows with how many agents run: none for one, 3 for two, 10 for ten, 19 from about ninety', () => {
    expect([1, 2, 3, 4, 10, 16, 50, 90, 100, 1000].map(levelsBelow)).toEqual([0, 3, 5, 6, 10, 12, 18, 19, 19, 19]);
  });

  it('one agent runs as the service does; a second puts both sessions 3 levels below, what they start included; once it exits the first goes back', async () => {
    const spawner = createExecaSpawner();
    // The agent starts a process of its own only when signalled, surely after the spawner returned.
    const first = await start(spawner, 'trap "sleep 30 & echo \\$!; wait" USR1; echo ready; while :; do sleep 1; done');
    expect(getPriority(first.child.pid)).toBe(getPriority());
    if (autogroups) expect(autogroupNice(first.child.pid)).toBe(autogroupNice('self'));
    const second = await start(spawner, 'sleep 30');
    expect(getPriority(second.child.pid)).toBe(below(getPriority(), 3));
    if (!autogroups) return;
    expect(autogroupNice(first.child.pid)).toBe(below(autogroupNice('self'), 3));
    expect(autogroupNice(second.child.pid)).toBe(below(autogroupNice('self'), 3));
    await waitFor(() => first.lines.includes('ready'));
    process.kill(first.child.pid, 'SIGUSR1');
    await waitFor(() => first.lines.length > 1);
    expect(autogroupNice(Number(first.lines[1]))).toBe(autogroupNice(first.child.pid));
    second.child.kill('SIGKILL');
    await second.child.exit;
    await waitFor(() => autogroupNice(first.child.pid) === autogroupNice('self'), { what: 'the first agent back at the service level' });
  });

  it('with lowerPriority: false every agent runs at the service own priority', async () => {
    const spawner = createExecaSpawner({ lowerPriority: false });
    const children = [await start(spawner, 'sleep 30'), await start(spawner, 'sleep 30')];
    for (const { child } of children) {
      expect(getPriority(child.pid)).toBe(getPriority());
      if (autogroups) expect(autogroupNice(child.pid)).toBe(autogroupNice('self'));
    }
  });
});
