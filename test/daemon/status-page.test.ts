import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Daemon, api, cleanupDaemons, startDaemon, tempDir, waitRun, writeConfig } from '../helpers/daemon';
import { waitFor } from '../helpers/wait';

/**
 * The status page in a real headless Chromium (Debian's, driven by playwright-core). `npm test`
 * installs Debian's chromium first where it can (as root with apt); elsewhere, without it, this
 * file is skipped, saying so — except in CI, where it must run.
 */

const CHROMIUM = '/usr/bin/chromium';
const present = existsSync(CHROMIUM);
if (!present && !process.env.CI) console.warn(`status-page tests skipped: ${CHROMIUM} is not installed (apt-get install chromium)`);

const dirs: string[] = [];
let daemon: Daemon;
let browser: Browser;

beforeAll(async () => {
  if (!present && !process.env.CI) return;
  const dir = tempDir();
  dirs.push(dir);
  writeConfig(dir, {
    workspaces: [
      { id: 'ws', path: '.', tag: 'main', agents: ['fake'] },
      { id: 'other', path: '.', agents: ['fake'] },
    ],
  });
  daemon = await startDaemon(dir);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await daemon?.stop();
  cleanupDaemons(dirs);
});

const start = async (prompt: string) =>
  (await (await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt, agent: 'fake' })).json()) as { taskId: string; resumeId: string };

describe.skipIf(!present && !process.env.CI)('the status page at /', () => {
  it('shows runs live, a run’s timeline and output, the Inbox; cancel, mark read and retire work', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    const res = await page.goto(`${daemon.url}/`);
    expect(res!.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
    await expect.poll(() => page.locator('#workspace option').allTextContents()).toEqual(['ws (main)', 'other']);

    // A run that runs a while: listed as running, then succeeded, without a reload.
    const run = await start('session page-1; echo working; sleep 5000; echo done');
    const row = page.locator(`tr[data-task="${run.taskId}"]`);
    await expect.poll(() => row.locator('td.status').textContent(), { timeout: 10_000 }).toBe('running');
    await row.click();
    await expect
      .poll(() => page.locator('#timeline li').allTextContents(), { timeout: 10_000 })
      .toEqual(expect.arrayContaining([expect.stringContaining('run.started'), expect.stringContaining('agent.session')]));
    await expect.poll(() => row.locator('td.status').textContent(), { timeout: 15_000 }).toBe('succeeded');
    await expect.poll(() => page.locator('#timeline li').last().textContent()).toContain('run.ended  succeeded');
    await expect.poll(() => page.locator('#output').textContent()).toBe('session=page-1\nworking\ndone\n');

    // Retire the selected run's Session.
    await page.locator('#retire').click();
    await expect.poll(async () => ((await (await api(daemon, 'GET', `/api/sessions/${run.resumeId}`)).json()) as { status: string }).status).toBe('retired');
    await expect.poll(() => page.locator('#session').textContent()).toContain('retired');

    await api(daemon, 'POST', '/api/workspaces/ws/inbox', {
      title: 'Nightly checks: 2 tests fail',
      body: 'test/api.test.ts: 2 failures in "list pages"; a fix is on branch fix/list-pages.',
    });
    const shot = process.env.SCREENSHOT ?? join(dirs[0]!, 'status-page.png');
    await expect.poll(() => page.locator('#inbox li').count(), { timeout: 10_000 }).toBe(1);
    await page.screenshot({ path: resolve(shot) });

    // Cancel from the list.
    const long = await start('sleep 30000');
    const longRow = page.locator(`tr[data-task="${long.taskId}"]`);
    await longRow.locator('button[data-action="cancel"]').click({ timeout: 10_000 });
    expect((await waitRun(daemon, long.taskId)).status).toBe('cancelled');
    await expect.poll(() => longRow.locator('td.status').textContent(), { timeout: 10_000 }).toBe('cancelled');

    // The Inbox, with a title that would be markup if it were ever parsed as HTML.
    const hostile = '<img src=x onerror="document.title=\'owned\'">';
    const pushed = (await (await api(daemon, 'POST', '/api/workspaces/ws/inbox', { title: hostile, body: 'report body' })).json()) as { id: string };
    const item = page.locator('#inbox li', { hasText: 'report body' });
    await expect.poll(() => item.count(), { timeout: 10_000 }).toBe(1);
    expect(await item.locator('span').first().textContent()).toBe(hostile);
    expect(await page.locator('#inbox img').count()).toBe(0);
    expect(await page.title()).toBe('headless-run-webhook');

    await item.getByRole('button', { name: 'Mark read' }).click();
    await waitFor(
      async () => {
        const { items } = (await (await api(daemon, 'GET', '/api/workspaces/ws/inbox')).json()) as { items: Array<{ id: string; readAt: string | null }> };
        return items.find((i) => i.id === pushed.id)?.readAt !== null;
      },
      { what: 'the item to be read' },
    );
    expect(errors).toEqual([]);
    await page.close();
  }, 60_000);

  it('is refused to a page of another site, like every route', async () => {
    const res = await fetch(`${daemon.url}/`, { headers: { 'sec-fetch-site': 'cross-site' } });
    expect(res.status).toBe(403);
  });
});
