import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { delimiter, join, resolve } from 'node:path';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Daemon, api, cleanupDaemons, startDaemon, tempDir, waitRun, writeConfig } from '../helpers/daemon';
import { HOSTILE_NAME, seedUsage } from '../helpers/usage-runs';
import { waitFor } from '../helpers/wait';
import { mockEnv, writeHome } from '../fixtures/mock-model/homes.mjs';
import { type MockModel, startMockModel } from '../fixtures/mock-model/server.mjs';

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
let mock: MockModel;
let seeded: { today: string; yesterday: string };

beforeAll(async () => {
  if (!present && !process.env.CI) return;
  const dir = tempDir();
  dirs.push(dir);
  mock = await startMockModel();
  const home = join(dir, 'gemini-home');
  writeHome(home, mock.url);
  writeConfig(dir, {
    // Its deliveries are the Trigger deliveries view's: one started, a repeat, one filtered.
    triggers: [
      {
        name: 'alerts',
        workspace: 'ws',
        sender: 'generic',
        secret: 'alerts-token',
        verify: { method: 'bearer' },
        prompt: 'Alert {{ payload.n }}',
        when: { 'payload.severity': 'page' },
        dedupe: { key: '{{ payload.n }}' },
        run: { agent: 'fake' },
      },
    ],
    workspaces: [
      { id: 'ws', path: '.', tag: 'main', agents: ['fake'] },
      { id: 'other', path: '.' },
      // Runs stored before the daemon starts, with known usage (helpers/usage-runs.ts): the Costs.
      { id: 'costs', path: '.', agents: ['fake'], limits: { runsPerDay: 3, spendPerDayUsd: 20 } },
      // The real gemini over ACP, against the mock model: its file-writing turn asks.
      {
        id: 'ask',
        path: '.',
        agents: ['gemini-acp'],
        run: { permissions: 'ask' },
        env: { ...mockEnv(home, mock.url, 'mock-ok'), PATH: [resolve(__dirname, '../../node_modules/.bin'), process.env.PATH].join(delimiter) },
      },
    ],
  });
  seeded = await seedUsage(join(dir, '.headless'), 'costs');
  daemon = await startDaemon(dir, ['--port', '0', '--demo']);
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
}, 600_000);

afterAll(async () => {
  await browser?.close();
  await daemon?.stop();
  await mock?.close();
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
    await expect.poll(() => page.locator('#workspace option').allTextContents()).toEqual(['ws (main)', 'other', 'costs', 'ask']);

    // A run that runs a while: listed as running, then succeeded, without a reload.
    const run = await start('session page-1; echo working; sleep 5000; echo done');
    const row = page.locator(`tr[data-task="${run.taskId}"]`);
    await expect.poll(() => row.locator('td.status').textContent()).toBe('running');
    await row.click();
    await expect
      .poll(() => page.locator('#timeline li').allTextContents())
      .toEqual(expect.arrayContaining([expect.stringContaining('run.started'), expect.stringContaining('agent.session')]));
    await expect.poll(() => row.locator('td.status').textContent()).toBe('succeeded');
    await expect.poll(() => page.locator('#timeline li').last().textContent()).toContain('run.ended: succeeded');
    await expect.poll(() => page.locator('#output').textContent()).toBe('session=page-1\nworking\ndone\n');

    // Retire the selected run's Session.
    await page.locator('#retire').click();
    await expect.poll(async () => ((await (await api(daemon, 'GET', `/api/sessions/${run.resumeId}`)).json()) as { status: string }).status).toBe('retired');
    await expect.poll(() => page.locator('#session').textContent()).toContain('retired');

    await api(daemon, 'POST', '/api/workspaces/ws/inbox', {
      title: 'Nightly checks: 2 tests fail',
      body: 'test/api.test.ts: 2 failures in "list pages"; a fix is on branch fix/list-pages.',
    });
    await expect.poll(() => page.locator('#inbox li').count()).toBe(1);

    // Cancel from the list, confirmed in the dialog it asks.
    const dialogs: string[] = [];
    page.once('dialog', (d) => {
      dialogs.push(d.message());
      void d.accept();
    });
    const long = await start('sleep 30000');
    const longRow = page.locator(`tr[data-task="${long.taskId}"]`);
    await longRow.locator('button[data-action="cancel"]').click();
    expect((await waitRun(daemon, long.taskId)).status).toBe('cancelled');
    expect(dialogs).toEqual([expect.stringMatching(/^Cancel fake \w{8}\? Its agent is stopped\.$/)]);
    await expect.poll(() => longRow.locator('td.status').textContent()).toBe('cancelled');

    // The Inbox, with a title that would be markup if it were ever parsed as HTML.
    const hostile = '<img src=x onerror="document.title=\'owned\'">';
    const pushed = (await (await api(daemon, 'POST', '/api/workspaces/ws/inbox', { title: hostile, body: 'report body' })).json()) as { id: string };
    const item = page.locator('#inbox li', { hasText: 'report body' });
    await expect.poll(() => item.count()).toBe(1);
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
  }, 600_000);

  it('a running run takes a follow-up from its field, its next turn; a run with checks lists each attempt', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${daemon.url}/`);
    const gate = join(daemon.dir, 'follow-up-gate');
    const run = await start(`session page-2; wait-file ${gate}; echo first turn`);
    const row = page.locator(`tr[data-task="${run.taskId}"]`);
    await expect.poll(() => row.locator('td.status').textContent()).toBe('running');
    await row.click();
    await expect.poll(() => page.locator('#follow-up').isVisible()).toBe(true);
    // The fake agent's next turn runs what it is told: this follow-up's words.
    await page.locator('#follow-up-text').fill('echo from the follow-up');
    await page.locator('#follow-up button[type="submit"]').click();
    await expect.poll(() => page.locator('#timeline li').allTextContents()).toEqual(expect.arrayContaining([expect.stringContaining('follow-up queued')]));
    writeFileSync(gate, '');
    expect((await waitRun(daemon, run.taskId)).status).toBe('succeeded');
    await expect.poll(() => page.locator('#output').textContent()).toContain('from the follow-up');

    const checked = (await (
      await api(daemon, 'POST', '/api/workspaces/ws/headless', {
        prompt: 'session page-3; echo done',
        agent: 'fake',
        verify: { checks: [{ name: 'lint', command: 'exit 3' }], maxAttempts: 1 },
      })
    ).json()) as { taskId: string };
    expect((await waitRun(daemon, checked.taskId)).status).toBe('failed');
    await page.locator(`tr[data-task="${checked.taskId}"]`).click();
    await expect.poll(() => page.locator('#summary').textContent()).toContain('Checks, attempt 1: failing lint (exit 3)');
    await expect
      .poll(() => page.locator('#timeline li').allTextContents())
      .toEqual(expect.arrayContaining([expect.stringContaining('check lint: failed (exit 3)')]));
    expect(errors).toEqual([]);
    await page.close();
  }, 600_000);

  it('is a dashboard: states, titled runs, filters, pages, a link per run, the conversation, the Inbox beside, at 1280, 800 and 400 px', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${daemon.url}/`);
    await page.locator('#workspace').selectOption('other');
    await expect.poll(() => page.locator('#runs-state').textContent()).toBe('No runs yet in this workspace.');
    await expect.poll(() => page.locator('#inbox-state').textContent()).toBe('The Inbox is empty.');

    const other = (body: Record<string, unknown>) => api(daemon, 'POST', '/api/workspaces/other/headless', { agent: 'fake', ...body });
    for (let i = 1; i <= 21; i++)
      await other({ prompt: `echo ${i}`, title: `Nightly check ${i}`, metadata: { team: i % 5 === 0 ? 'infra' : 'web' }, wait: true });
    const demo = (await (await other({ agent: 'demo', prompt: 'What is here?', title: 'Demo summary', wait: true })).json()) as { taskId: string };
    const gate = join(dirs[0]!, 'dashboard-gate');
    await other({ prompt: `wait-file ${gate}`, title: 'Long task' });

    // Newest first, titled, 20 a page; the running one's time goes on.
    const names = () => page.locator('#runs td.name').allTextContents();
    await expect.poll(async () => (await names()).slice(0, 2)).toEqual(['Long task', 'Demo summary']);
    expect(await page.locator('#runs tr').count()).toBe(20);
    const time = page.locator('#runs tr').first().locator('td.time');
    const before = await time.textContent();
    await expect.poll(() => time.textContent()).not.toBe(before);
    await page.locator('#older').click();
    await expect.poll(names).toEqual(['Nightly check 3', 'Nightly check 2', 'Nightly check 1']);
    expect(await page.locator('#page').textContent()).toBe('page 2');
    await page.locator('#newest').click();
    await expect.poll(async () => (await names())[0]).toBe('Long task');

    // Filters: metadata, status, agent; a filter that matches nothing says so.
    await page.locator('#f-metadata').fill('team:infra');
    await page.locator('#filters button[type="submit"]').click();
    await expect.poll(names).toEqual(['Nightly check 20', 'Nightly check 15', 'Nightly check 10', 'Nightly check 5']);
    await page.locator('#f-metadata').fill('');
    await page.locator('#f-status').selectOption('running');
    await expect.poll(names).toEqual(['Long task']);
    await page.locator('#f-status').selectOption('');
    await page.locator('#f-agent').fill('demo');
    await page.locator('#filters button[type="submit"]').click();
    await expect.poll(names).toEqual(['Demo summary']);
    await page.locator('#f-agent').fill('nobody');
    await page.locator('#filters button[type="submit"]').click();
    await expect.poll(() => page.locator('#runs-state').textContent()).toBe('No runs match these filters.');
    await page.locator('#f-agent').fill('');
    await page.locator('#filters button[type="submit"]').click();

    // A link per run opens it: its conversation, messages and tool calls as text, never raw JSON.
    const linked = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    linked.on('pageerror', (e) => errors.push(e.message));
    await linked.goto(`${daemon.url}/#${demo.taskId}`);
    await expect.poll(() => linked.locator('#timeline li.msg').allTextContents()).toContain('Demo agent: no model is called; looking at the workspace.');
    await expect.poll(() => linked.locator('#timeline li.tool').allTextContents()).toEqual(['⚙ list_files succeeded', '⚙ headless-inbox succeeded']);
    expect(await linked.locator('#timeline').textContent()).not.toContain('{');
    await linked.close();

    // The Inbox beside the runs, the run panel in view while the page scrolls.
    await page.locator(`#runs a[href="#${demo.taskId}"]`).click();
    await expect.poll(() => page.locator('#inbox li').count()).toBe(1);
    const runsBox = (await page.locator('#runs-section').boundingBox())!;
    const inboxBox = (await page.locator('#inbox-section').boundingBox())!;
    expect(inboxBox.x).toBeGreaterThan(runsBox.x + runsBox.width);
    expect(Math.abs(inboxBox.y - runsBox.y)).toBeLessThan(2);
    await page.setViewportSize({ width: 800, height: 500 });
    await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
    const detail = (await page.locator('#detail').boundingBox())!;
    expect(detail.y).toBeGreaterThanOrEqual(0);
    expect(detail.y).toBeLessThan(500);

    // Three widths: nothing wider than the window; a picture of each (SCREENSHOTS=docs writes the docs' ones).
    for (const width of [1280, 800, 400]) {
      await page.setViewportSize({ width, height: 900 });
      await page.evaluate(() => window.scrollTo(0, 0));
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width);
      const folder = process.env.SCREENSHOTS ? resolve(process.env.SCREENSHOTS) : dirs[0]!;
      await page.screenshot({ path: join(folder, `status-page-${width}.png`) });
    }
    expect(await page.locator('#runs th.wide').first().isVisible()).toBe(false);
    // The longest status word is never cut ("interrupt…"), at any width; the run panel names its workspace.
    for (const width of [1280, 800, 400]) {
      await page.setViewportSize({ width, height: 900 });
      const cut = await page.evaluate(() => {
        const cell = document.querySelector('#runs td.status');
        if (!cell) return 'no status cell';
        const was = cell.textContent;
        cell.textContent = 'interrupted';
        const over = cell.scrollWidth > cell.clientWidth;
        cell.textContent = was;
        return over;
      });
      expect(cut, `at ${width} px`).toBe(false);
    }
    await expect.poll(() => page.locator('#summary').textContent()).toContain('Workspace other');
    writeFileSync(gate, '');
    expect(errors).toEqual([]);
    await page.close();
  }, 600_000);

  it('shows the questions agents wait on (docs/approvals.md), and Allow and Deny answer them', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${daemon.url}/`);
    await page.locator('#workspace').selectOption('ask');
    expect(await page.locator('#questions-section').isVisible()).toBe(false);
    const ask = async (file: string) =>
      ((await (await api(daemon, 'POST', '/api/workspaces/ask/headless', { agent: 'gemini-acp', prompt: `WRITE_FILE ${file}` })).json()) as { taskId: string })
        .taskId;
    const allowed = await ask('page-allowed.txt');
    const question = page.locator('#questions li');
    await expect.poll(() => question.count()).toBe(1);
    expect(await question.locator('.what').textContent()).toBe('edit: Writing to page-allowed.txt');
    expect(await question.locator('a').getAttribute('href')).toBe(`#${allowed}`);
    await question.getByRole('button', { name: 'Allow' }).click();
    expect(await waitRun(daemon, allowed)).toMatchObject({ status: 'succeeded', approvals: { allowed: 1 } });
    await expect.poll(() => page.locator('#questions-section').isVisible()).toBe(false);

    const denied = await ask('page-denied.txt');
    await expect.poll(() => question.count()).toBe(1);
    await question.getByRole('button', { name: 'Deny' }).click();
    expect(await waitRun(daemon, denied)).toMatchObject({ status: 'succeeded', approvals: { denied: 1 } });
    // The run's conversation shows the question and its answer.
    await page.locator(`#runs a[href="#${denied}"]`).click();
    await expect
      .poll(() => page.locator('#timeline li.note').allTextContents())
      .toEqual(expect.arrayContaining(['asks: edit: Writing to page-denied.txt', 'denied by a caller']));
    expect(errors).toEqual([]);
    await page.close();
  }, 600_000);

  it('passes an accessibility check (axe-core) with runs, a conversation and the Inbox shown', async () => {
    // axe is injected past the page's CSP, which allows the page's own script only.
    const context = await browser.newContext({ bypassCSP: true, viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${daemon.url}/`);
    await page.locator('#workspace').selectOption('other');
    await expect.poll(() => page.locator('#runs tr').count()).toBeGreaterThan(0);
    await page.locator('#runs tr').nth(1).click();
    await expect.poll(() => page.locator('#timeline li').count()).toBeGreaterThan(0);
    await page.evaluate(readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8'));
    const violations = await page.evaluate(async () => {
      const result = await (window as unknown as { axe: { run(): Promise<{ violations: Array<{ id: string; nodes: unknown[] }> }> } }).axe.run();
      return result.violations.map((v) => `${v.id} (${v.nodes.length})`);
    });
    expect(violations).toEqual([]);
    await context.close();
  });

  it('Costs: per day, by workspace, agent, schedule and trigger, estimated figures marked, the daily limits beside; names stay text; at 1280 and 400 px', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${daemon.url}/`);
    await page.locator('#workspace').selectOption('costs');
    const table = () => page.evaluate(() => [...document.querySelectorAll('#costs tr')].map((tr) => [...tr.children].map((td) => td.textContent)));
    const { today, yesterday } = seeded;
    await expect.poll(table).toEqual([
      [today, '3', '3010 / 401', '$0.88$0.25 estimated'],
      ['workspace costs', '3', '3010 / 401', '$0.88$0.25 estimated'],
      // Costliest first.
      ['agent claude', '1', '1000 / 100', '$0.50'],
      ['agent codex', '1', '2000 / 300', '$0.25$0.25 estimated'],
      [`agent ${HOSTILE_NAME}`, '1', '10 / 1', '$0.13'],
      ['schedule nightly', '1', '2000 / 300', '$0.25$0.25 estimated'],
      [`trigger ${HOSTILE_NAME}`, '1', '10 / 1', '$0.13'],
      [yesterday, '1', '5 / 5', '$1.00'],
      ['workspace costs', '1', '5 / 5', '$1.00'],
      ['agent claude', '1', '5 / 5', '$1.00'],
    ]);
    // Its names are text: the stored markup made no element and ran nothing.
    expect(await page.locator('#costs img').count()).toBe(0);
    expect(await page.title()).toBe('headless-run-webhook');
    // The daily limits beside what today used; one reached is marked.
    expect(await page.locator('#limits li').allTextContents()).toEqual(['workspace costs: 3 of 3 runs, $0.88 of $20.00 today: reached']);
    expect(await page.locator('#limits li.over').count()).toBe(1);
    await page.locator('#c-days').selectOption('1');
    await expect.poll(async () => (await table()).map((row) => row[0])).not.toContain(yesterday);
    await page.locator('#c-scope').selectOption('all');
    await expect
      .poll(() => page.locator('#limits li').allTextContents())
      .toEqual([
        'workspace ws: no daily limit',
        'workspace other: no daily limit',
        'workspace costs: 3 of 3 runs, $0.88 of $20.00 today: reached',
        'workspace ask: no daily limit',
      ]);
    await page.locator('#c-scope').selectOption('one');
    await page.locator('#c-days').selectOption('7');
    // At 400 px: nothing wider than the window, no figure cut.
    await page.setViewportSize({ width: 400, height: 900 });
    await expect.poll(async () => (await table()).length).toBe(10);
    await page.locator('#costs-section').scrollIntoViewIfNeeded();
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(400);
    const cut = await page.evaluate(() =>
      [...document.querySelectorAll('#costs td')].filter((td) => td.scrollWidth > td.clientWidth).map((td) => td.textContent),
    );
    expect(cut).toEqual([]);
    const folder = process.env.SCREENSHOTS ? resolve(process.env.SCREENSHOTS) : dirs[0]!;
    await page.locator('#costs-section').screenshot({ path: join(folder, 'status-page-costs-400.png') });
    expect(errors).toEqual([]);
    await page.close();
  });

  it('Trigger deliveries: every outcome of the workspace’s triggers, filtered by outcome, each run linked', async () => {
    const deliver = (payload: Record<string, unknown>) =>
      fetch(`${daemon.url}/api/triggers/alerts`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer alerts-token' },
        body: JSON.stringify(payload),
      }).then(async (res) => (await res.json()) as { outcome: string; taskId?: string });
    const started = await deliver({ n: 1, severity: 'page' });
    expect(started.outcome).toBe('started');
    expect(await deliver({ n: 1, severity: 'page' })).toMatchObject({ outcome: 'deduplicated', taskId: started.taskId });
    expect(await deliver({ n: 2, severity: 'info' })).toMatchObject({ outcome: 'filtered' });
    const page = await browser.newPage({ viewport: { width: 400, height: 900 } });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${daemon.url}/`);
    const rows = () => page.evaluate(() => [...document.querySelectorAll('#deliveries tr')].map((tr) => [...tr.children].slice(1).map((td) => td.textContent)));
    const run = started.taskId!.slice(-8);
    await expect.poll(rows).toEqual([
      ['filtered', '', 'payload.severity does not match', ''],
      ['deduplicated', '', 'seen within the dedupe window', run],
      ['started', '', '', run],
    ]);
    await page.locator('#t-outcome').selectOption('deduplicated');
    await expect.poll(rows).toEqual([['deduplicated', '', 'seen within the dedupe window', run]]);
    await page.locator('#deliveries a').click();
    await expect.poll(() => page.evaluate(() => location.hash)).toBe(`#${started.taskId}`);
    // Another workspace has no trigger: the view is not shown.
    await page.locator('#workspace').selectOption('other');
    await expect.poll(() => page.locator('#triggers-section').isHidden()).toBe(true);
    await page.locator('#workspace').selectOption('ws');
    await page.locator('#triggers-section').scrollIntoViewIfNeeded();
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(400);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('is refused to a page of another site, like every route', async () => {
    const res = await fetch(`${daemon.url}/`, { headers: { 'sec-fetch-site': 'cross-site' } });
    expect(res.status).toBe(403);
  });
});
