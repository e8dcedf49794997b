import { execFileSync } from 'node:child_process';
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { canMountTmpfs } from '../helpers/mounts';
import { type Daemon, api, cleanupDaemons, startDaemon, tempDir, writeConfig } from '../helpers/daemon';
import { closeReceivers, startReceiver } from '../helpers/receiver';
import { waitFor } from '../helpers/wait';

/**
 * A data directory on a 2 MB tmpfs, filled while runs go on: writes are refused (503), the
 * journal stays small, the service starts again on the full disk (after kill -9 and after a
 * clean stop) answering reads, and once space returns every acknowledged run ends with a status
 * that never contradicts one the API showed before. Where tmpfs cannot be mounted (not root, or
 * no such right in a container) it is skipped, saying so.
 */

const SECRET = `whsec_${Buffer.alloc(32, 3).toString('base64')}`;
const dirs: string[] = [];
afterAll(async () => {
  cleanupDaemons(dirs);
  await closeReceivers();
});

const mountable = canMountTmpfs();
if (!mountable) console.log('full-disk test skipped: this machine does not let the test mount a tmpfs (it needs root)');

describe.skipIf(!mountable)('a full disk (the data dir on a 2 MB tmpfs)', () => {
  it('refuses writes, keeps the journal small, starts again on the full disk, and contradicts nothing it showed once space returns', {
    timeout: 90_000,
  }, async () => {
    const receiver = await startReceiver();
    const cwd = tempDir();
    dirs.push(cwd);
    writeConfig(cwd, {
      webhooks: { allowPrivateTargets: true, retryDelaysMs: [300, 300, 300, 300] },
      workspaces: [{ id: 'ws', path: '.', agents: ['fake'], webhook: { url: receiver.url } }],
    });
    const data = join(cwd, 'data');
    mkdirSync(data);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', data]);
    const env = { HEADLESS_WEBHOOK_SECRET: SECRET };
    const serve = () => startDaemon(cwd, ['--port', '0', '--data-dir', data], env);
    try {
      let d: Daemon = await serve();
      const acked: string[] = [];
      /** Every terminal status the API showed for a run. */
      const shown = new Map<string, Set<string>>();
      const look = async (daemon: Daemon) => {
        for (const id of acked) {
          const res = await api(daemon, 'GET', `/api/headless/${id}`);
          if (res.status !== 200) continue;
          const { status } = (await res.json()) as { status: string };
          if (status !== 'running') shown.set(id, new Set([...(shown.get(id) ?? []), status]));
        }
      };
      let refused = 0;
      for (let i = 0; i < 200 && refused < 5; i++) {
        const start = await api(d, 'POST', '/api/workspaces/ws/headless', { prompt: i % 2 ? 'echo x; sleep 300' : 'sleep 4000', agent: 'fake' });
        if (start.status === 202) acked.push(((await start.json()) as { taskId: string }).taskId);
        else await start.body?.cancel();
        const push = await api(d, 'POST', '/api/workspaces/ws/inbox', { title: `t${i}`, body: 'b'.repeat(60_000) });
        if (push.status === 503) refused++;
        else expect(push.status).toBe(201);
        await push.body?.cancel();
        await look(d);
      }
      expect(refused).toBe(5);
      expect(acked.length).toBeGreaterThan(0);
      // The journal is bounded: it never takes the whole volume by itself.
      const wal = join(data, 'headless.sqlite-wal');
      expect(statSync(wal, { throwIfNoEntry: false })?.size ?? 0).toBeLessThan(1_600_000);
      // Killed while full, with runs going on: it starts again on the full disk, answers reads, refuses writes.
      expect(await d.stop('SIGKILL')).toBeNull();
      d = await serve();
      expect((await api(d, 'GET', '/api/headless?wsId=ws')).status).toBe(200);
      await look(d);
      const write = await api(d, 'POST', '/api/workspaces/ws/inbox', { title: 'full', body: 'b'.repeat(60_000) });
      expect(write.status).toBe(503);
      await write.body?.cancel();
      // A clean stop and start on the full disk, too.
      expect(await d.stop()).toBe(0);
      d = await serve();
      expect((await api(d, 'GET', '/api/headless?wsId=ws')).status).toBe(200);
      await look(d);
      // Space returns: recovery finishes by itself; every run ends, never contradicting what was shown.
      execFileSync('mount', ['-o', 'remount,size=32m', data]);
      await waitFor(
        async () => {
          await look(d);
          return acked.every((id) => shown.has(id));
        },
        { timeoutMs: 240_000, intervalMs: 250, what: 'every acknowledged run to end' },
      );
      for (const [id, statuses] of shown) expect([...statuses], id).toHaveLength(1);
      const listed = ((await (await api(d, 'GET', '/api/headless?wsId=ws&limit=500')).json()) as { runs: Array<{ taskId: string; status: string }> }).runs;
      for (const id of acked) expect(listed.filter((r) => r.taskId === id).map((r) => r.status)).toEqual([...shown.get(id)!]);
      expect(await d.stop()).toBe(0);
    } finally {
      execFileSync('umount', ['-l', data]);
    }
  });
});
