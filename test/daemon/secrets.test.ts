import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { everything } from '../helpers/files';
import { api, cleanupDaemons, startDaemon, tempDir, waitRun, writeConfig } from '../helpers/daemon';

/**
 * docs/security.md "Per-run secrets" through the built daemon: what a hostile agent sends out
 * (an Inbox item, its answer) goes without its secret; a queued start's values are held in
 * memory only, never on disk, so a start queued when the daemon is killed ends failed,
 * `secrets_unavailable`, after the restart.
 */

const SECRET = 'sk-daemon-secret-0123456789';
const dirs: string[] = [];
afterAll(() => cleanupDaemons(dirs));

const script = (text: string) => ({ command: 'sh', args: ['-c', `${text}\necho session=s-1`, 'sh', '{prompt}'] });

describe('per-run secrets, through the built daemon', () => {
  it('what the agent sends out (an Inbox item, its answer) goes without its secret', async () => {
    const dir = tempDir();
    dirs.push(dir);
    mkdirSync(join(dir, 'ws'));
    const send = 'echo "the key is $API_KEY" | headless-inbox push --title leak\nheadless-inbox result "{\\"key\\":\\"$API_KEY\\"}"';
    writeConfig(dir, { agents: { sender: script(send) }, workspaces: [{ id: 'ws', path: 'ws' }] });
    const daemon = await startDaemon(dir);
    try {
      const res = await api(daemon, 'POST', '/api/workspaces/ws/headless', {
        prompt: 'x',
        agent: 'sender',
        secrets: { API_KEY: SECRET },
        outputSchema: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] },
      });
      const { taskId } = (await res.json()) as { taskId: string };
      const run = (await waitRun(daemon, taskId)) as Record<string, any>;
      expect(run, JSON.stringify(run)).toMatchObject({ status: 'succeeded', result: { key: '[secret API_KEY]' } });
      const inbox = (await (await api(daemon, 'GET', '/api/workspaces/ws/inbox')).json()) as { items: Array<{ id: string }> };
      const item = await (await api(daemon, 'GET', `/api/workspaces/ws/inbox/${inbox.items[0]?.id}`)).json();
      expect(JSON.stringify(item)).toContain('the key is [secret API_KEY]');
      await daemon.stop();
      expect(everything(dir)).not.toContain(SECRET);
    } finally {
      await daemon.stop();
    }
  });

  it('a queued start’s values are in memory only: it runs with them, and one queued when the daemon is killed ends secrets_unavailable', async () => {
    const dir = tempDir();
    dirs.push(dir);
    mkdirSync(join(dir, 'ws'));
    // Holds the only run slot until the test writes `release` (bounded: a minute).
    const hold = script('i=0; while [ ! -f release ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; rm -f release');
    writeConfig(dir, {
      maxConcurrentRuns: 1,
      queue: { max: 10 },
      agents: { hold, shows: script('echo "got [$API_KEY]"') },
      workspaces: [{ id: 'ws', path: 'ws' }],
    });
    const start = async (agent: string, secrets?: Record<string, string>) => {
      const res = await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'x', agent, ...(secrets ? { secrets } : {}) });
      const body = (await res.json()) as { taskId: string; status: string };
      expect(res.status, JSON.stringify(body)).toBe(202);
      return body;
    };
    let daemon = await startDaemon(dir);
    try {
      const first = await start('hold');
      const queued = await start('shows', { API_KEY: SECRET });
      expect(queued.status).toBe('queued');
      expect(everything(dir)).not.toContain(SECRET);
      writeFileSync(join(dir, 'ws', 'release'), '');
      expect(await waitRun(daemon, first.taskId)).toMatchObject({ status: 'succeeded' });
      expect(await waitRun(daemon, queued.taskId)).toMatchObject({ status: 'succeeded' });
      const output = (await (await api(daemon, 'GET', `/api/headless/${queued.taskId}/output`)).json()) as { stdout: string };
      expect(output.stdout).toContain('got [[secret API_KEY]]');

      const holding = await start('hold');
      const lost = await start('shows', { API_KEY: SECRET });
      expect(lost.status).toBe('queued');
      expect(await daemon.stop('SIGKILL')).toBeNull();
      writeFileSync(join(dir, 'ws', 'release'), '');
      daemon = await startDaemon(dir);
      const ended = (await waitRun(daemon, lost.taskId)) as Record<string, any>;
      expect(ended).toMatchObject({ status: 'failed', error: { code: 'secrets_unavailable' }, secrets: [{ name: 'API_KEY' }] });
      expect(ended.error.message).toContain('API_KEY');
      expect(await waitRun(daemon, holding.taskId)).toMatchObject({ status: 'interrupted' });
      await daemon.stop();
      expect(everything(dir)).not.toContain(SECRET);
    } finally {
      await daemon.stop();
    }
  });
});
