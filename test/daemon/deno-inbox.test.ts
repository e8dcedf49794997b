import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { deno, killTargets } from '../helpers/targets';

/** Under Deno a run's agent reports to the Inbox as under Node: its `headless-inbox` runs with the permissions it needs. */
const dir = mkdtempSync(join(tmpdir(), 'hrw-deno-'));
afterAll(() => {
  killTargets();
  rmSync(dir, { recursive: true, force: true });
});

it('a run served by Deno pushes to its Inbox with headless-inbox', async () => {
  const target = await deno({
    workspaces: [{ id: 'ws', path: dir, agents: ['pusher'] }],
    agents: { pusher: { command: '/bin/sh', args: ['-c', 'echo "the body" | headless-inbox push --title "pushed under deno"'], stdin: '{prompt}' } },
  });
  try {
    const started = await fetch(`${target.base}/api/workspaces/ws/headless`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', host: new URL(target.base).host },
      body: JSON.stringify({ prompt: 'x', agent: 'pusher', wait: true }),
    });
    const record = (await started.json()) as Record<string, any>;
    expect(record, JSON.stringify(record.output)).toMatchObject({ status: 'succeeded' });
    const inbox = (await (await fetch(`${target.base}/api/workspaces/ws/inbox`)).json()) as { items: Array<Record<string, unknown>> };
    expect(inbox.items.map((item) => item.title)).toEqual(['pushed under deno']);
  } finally {
    await target.close();
  }
}, 600_000);
