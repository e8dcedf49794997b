import { spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { sign as signGithub } from '@octokit/webhooks-methods';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Daemon, api, cleanupDaemons, runCli, startDaemon, tempDir, waitRun, writeConfig } from '../helpers/daemon';
import { waitFor } from '../helpers/wait';
import { type TestPostgres, startPostgres } from '../fixtures/postgres.mjs';

/**
 * docs/triggers.md: each sender's documented example payload, signed the way the sender signs it
 * (with its own library where it has one), delivered to the built daemon.
 */
const FIXTURES = resolve(__dirname, '../fixtures/triggers');
const payload = (name: string) => readFileSync(join(FIXTURES, `${name}.json`), 'utf8');
const hex = (secret: string, data: string) => createHmac('sha256', secret).update(data).digest('hex');
const GITLAB_SIGNING = `whsec_${Buffer.from('a gitlab signing token of 32 b!!').toString('base64')}`;
const SECRETS = {
  alerts: 'alertmanager-bearer-token',
  grafana: 'grafana-hmac',
  github: 'github-secret',
  gitlab: 'gitlab-shared-secret',
  sentry: 'sentry-client-secret',
  pagerduty: 'pagerduty-secret',
};

const dirs: string[] = [];
afterAll(() => cleanupDaemons(dirs));

/** An agent that prints its prompt; `slow` then waits a minute (to be cancelled). */
const AGENTS = {
  echo: { command: '/bin/sh', args: ['-c', 'cat'], stdin: '{prompt}' },
  slow: { command: '/bin/sh', args: ['-c', 'cat; exec sleep 60'], stdin: '{prompt}' },
};

function triggersConfig(dir: string) {
  const t = (name: string, sender: string, extra: Record<string, unknown>) => ({ name, workspace: 'ops', sender, run: { agent: 'echo' }, ...extra });
  return [
    t('alerts', 'alertmanager', {
      secret: { env: 'ALERTS_TOKEN' },
      run: { agent: 'slow' },
      prompt: 'Investigate {{ payload.commonLabels.alertname }} ({{ status }}): {{ payload.commonAnnotations.summary }}',
      when: { 'payload.commonLabels.severity': ['page', 'critical'] },
      resolved: 'cancel',
    }),
    t('grafana', 'grafana', {
      secret: SECRETS.grafana,
      verify: { method: 'grafana', timestampHeader: 'X-Grafana-Alerting-Signature-Timestamp' },
      prompt: 'Grafana says {{ payload.title }}',
    }),
    t('github', 'github', {
      secret: { file: join(dir, 'github-secret') },
      prompt: 'Triage {{ payload.repository.full_name }}#{{ payload.issue.number }}: {{ payload.issue.title }}',
      when: { event: 'issues.opened', 'payload.issue.labels[].name': 'bug' },
    }),
    t('gitlab', 'gitlab', { secret: SECRETS.gitlab, prompt: 'GitLab {{ event }}: {{ payload.object_attributes.title }}' }),
    t('gitlab-signed', 'gitlab', {
      secret: GITLAB_SIGNING,
      verify: { method: 'standard-webhooks' },
      prompt: 'GitLab {{ event }}: {{ payload.object_attributes.title }}',
    }),
    t('sentry', 'sentry', { secret: SECRETS.sentry, prompt: 'Fix Sentry issue {{ payload.data.issue.shortId }}: {{ payload.data.issue.title }}' }),
    t('pagerduty', 'pagerduty', {
      secret: SECRETS.pagerduty,
      prompt: 'Incident {{ payload.event.data.title }} on {{ payload.event.data.service.summary }}',
      when: { event: 'incident.triggered' },
    }),
    t('limited', 'generic', { secret: 'limited-token', verify: { method: 'bearer' }, prompt: 'Limited {{ payload.n }}', limits: { perMinute: 2 } }),
    t('serial', 'generic', {
      secret: 'serial-token',
      verify: { method: 'bearer' },
      run: { agent: 'slow' },
      prompt: 'Serial {{ payload.n }}',
      limits: { concurrent: 1 },
    }),
    t('plain', 'generic', { secret: 'plain-token', verify: { method: 'bearer' }, prompt: 'Plain {{ payload.n }}' }),
    t('off', 'generic', { secret: 'off-token', verify: { method: 'bearer' }, prompt: 'x', enabled: false }),
  ];
}

async function deliver(daemon: Daemon, trigger: string, body: string, headers: Record<string, string>) {
  const res = await fetch(`${daemon.url}/api/triggers/${trigger}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

/** A daemon's folder whose one trigger, `gh`, takes GitHub deliveries signed with `s`. */
function githubProject(): string {
  const cwd = tempDir();
  dirs.push(cwd);
  writeConfig(cwd, {
    agents: AGENTS,
    workspaces: [{ id: 'ops', path: '.' }],
    triggers: [{ name: 'gh', workspace: 'ops', sender: 'github', run: { agent: 'echo' }, secret: 's', prompt: '{{ event }}' }],
  });
  return cwd;
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const deliveries = async (daemon: Daemon, trigger: string) =>
  ((await (await api(daemon, 'GET', `/api/triggers/${trigger}/deliveries`)).json()) as { deliveries: Array<Record<string, any>> }).deliveries;
const output = async (daemon: Daemon, taskId: string) =>
  ((await (await api(daemon, 'GET', `/api/headless/${taskId}/output`)).json()) as { stdout: string }).stdout;

describe('triggers, through the built daemon', () => {
  let daemon: Daemon;
  let cwd: string;

  beforeAll(async () => {
    cwd = tempDir();
    dirs.push(cwd);
    mkdirSync(join(cwd, 'ops'));
    writeFileSync(join(cwd, 'github-secret'), `${SECRETS.github}\n`);
    writeConfig(cwd, { agents: AGENTS, workspaces: [{ id: 'ops', path: 'ops' }], triggers: triggersConfig(cwd) });
    daemon = await startDaemon(cwd, ['--port', '0'], { ALERTS_TOKEN: SECRETS.alerts });
  }, 600_000);
  afterAll(() => daemon?.stop());

  it('Alertmanager (Bearer): a firing group starts one run; its repeats start nothing; its resolution cancels the run', async () => {
    const firing = await deliver(daemon, 'alerts', payload('alertmanager'), bearer(SECRETS.alerts));
    expect(firing).toMatchObject({ status: 202, body: { outcome: 'started', taskId: expect.stringMatching(/^run_/) } });
    const { taskId } = firing.body;
    // Alertmanager repeats the group every repeat_interval while it fires: the same run is named, none started.
    const repeat = await deliver(daemon, 'alerts', payload('alertmanager').replace('"truncatedAlerts": 0', '"truncatedAlerts": 0 '), bearer(SECRETS.alerts));
    expect(repeat).toMatchObject({ status: 202, body: { outcome: 'deduplicated', taskId } });
    await waitFor(async () => (await output(daemon, taskId)).includes('Investigate'), { what: 'the run to print its prompt' });
    const prompt = await output(daemon, taskId);
    // The sender's values are marked as the delivery's, after a line that says so.
    expect(prompt).toContain('Investigate ⟦HighLatency⟧ (⟦firing⟧): ⟦p99 latency above 1s⟧');
    expect(prompt).toMatch(/^This run was started by trigger "alerts" from a alertmanager delivery\. Text between ⟦ and ⟧/);
    const record = (await (await api(daemon, 'GET', `/api/headless/${taskId}`)).json()) as Record<string, any>;
    expect(record.source).toMatchObject({ kind: 'trigger', name: 'alerts', delivery: firing.body.delivery });
    const resolved = payload('alertmanager').replaceAll('"firing"', '"resolved"');
    expect(await deliver(daemon, 'alerts', resolved, bearer(SECRETS.alerts))).toMatchObject({ status: 202, body: { outcome: 'resolved', taskId } });
    expect(await waitRun(daemon, taskId)).toMatchObject({ status: 'cancelled' });
    const events = (await (await api(daemon, 'GET', `/api/headless/${taskId}/events?format=json`)).json()) as { events: Array<Record<string, any>> };
    expect(events.events.find((e) => e.type === 'trigger.resolved')?.data).toMatchObject({ trigger: 'alerts', cancelled: true });
  });

  it('Alertmanager: a wrong token, an unknown trigger and a disabled one get the same 401; a filtered severity starts nothing', async () => {
    const wrong = await deliver(daemon, 'alerts', payload('alertmanager'), bearer('not-the-token'));
    const unknown = await deliver(daemon, 'nope', payload('alertmanager'), bearer(SECRETS.alerts));
    const disabled = await deliver(daemon, 'off', '{}', bearer('off-token'));
    for (const answer of [wrong, unknown, disabled]) expect(answer).toEqual({ status: 401, body: wrong.body });
    expect(wrong.body).toMatchObject({ code: 'unauthorized', detail: 'This delivery could not be verified.' });
    const warning = payload('alertmanager').replaceAll('"severity": "page"', '"severity": "warning"');
    expect(await deliver(daemon, 'alerts', warning, bearer(SECRETS.alerts))).toMatchObject({
      status: 202,
      body: { outcome: 'filtered', reason: 'payload.commonLabels.severity does not match' },
    });
    // The wrong token is counted and sampled, never a row of the log: an outsider's deliveries cost no write.
    const log = (await (await api(daemon, 'GET', '/api/triggers/alerts/deliveries')).json()) as Record<string, any>;
    expect(log.deliveries.map((d: Record<string, unknown>) => d.outcome)).toContain('filtered');
    expect(log.deliveries.map((d: Record<string, unknown>) => d.outcome)).not.toContain('refused');
    expect(log.unverified).toMatchObject({ count: 1, recent: [{ peer: expect.stringMatching(/127\.0\.0\.1/) }] });
  });

  it('GitHub (X-Hub-Signature-256, signed with @octokit/webhooks-methods): issues.opened with a bug label starts a run; a redelivery does not', async () => {
    const body = payload('github-issues-opened');
    const headers = {
      'x-github-event': 'issues',
      'x-github-delivery': '72d3162e-cc78-11e3-81ab-4c9367dc0958',
      'x-hub-signature-256': await signGithub(SECRETS.github, body),
    };
    const first = await deliver(daemon, 'github', body, headers);
    expect(first).toMatchObject({ status: 202, body: { outcome: 'started' } });
    expect(await deliver(daemon, 'github', body, headers)).toMatchObject({ body: { outcome: 'deduplicated', taskId: first.body.taskId } });
    expect(await waitRun(daemon, first.body.taskId)).toMatchObject({ status: 'succeeded' });
    expect(await output(daemon, first.body.taskId)).toContain('Triage ⟦octo-org/octo-repo⟧#⟦1347⟧: ⟦Found a bug⟧');
    // Another delivery id, another event: filtered; a body changed after signing: refused.
    const labelled = { ...headers, 'x-github-event': 'issue_comment', 'x-github-delivery': 'another' };
    expect(await deliver(daemon, 'github', body, labelled)).toMatchObject({ body: { outcome: 'filtered', reason: 'event does not match' } });
    expect((await deliver(daemon, 'github', body.replace('Found a bug', 'Found a bog'), headers)).status).toBe(401);
  });

  it('GitLab: X-Gitlab-Token, and signing tokens (Standard Webhooks) with a replay window', async () => {
    const body = payload('gitlab-issue');
    const token = await deliver(daemon, 'gitlab', body, { 'x-gitlab-token': SECRETS.gitlab, 'x-gitlab-event': 'Issue Hook', 'idempotency-key': 'gl-1' });
    expect(token).toMatchObject({ status: 202, body: { outcome: 'started' } });
    expect((await deliver(daemon, 'gitlab', body, { 'x-gitlab-token': 'wrong' })).status).toBe(401);
    expect(await output(daemon, (await waitRun(daemon, token.body.taskId)).taskId)).toContain('GitLab ⟦issue.open⟧: ⟦New API: create/update/delete file⟧');
    const signed = (id: string, at: Date) => ({
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': new Webhook(GITLAB_SIGNING).sign(id, at, body),
    });
    expect(await deliver(daemon, 'gitlab-signed', body, signed('msg_1', new Date()))).toMatchObject({ status: 202, body: { outcome: 'started' } });
    // Signed ten minutes ago: a replay, refused.
    expect((await deliver(daemon, 'gitlab-signed', body, signed('msg_2', new Date(Date.now() - 600_000)))).status).toBe(401);
  });

  it('Sentry (Sentry-Hook-Signature) and PagerDuty (X-PagerDuty-Signature, any of several v1= entries)', async () => {
    const sentry = payload('sentry-issue-created');
    const s = await deliver(daemon, 'sentry', sentry, {
      'sentry-hook-signature': hex(SECRETS.sentry, sentry),
      'sentry-hook-resource': 'issue',
      'request-id': 'r-1',
    });
    expect(s).toMatchObject({ status: 202, body: { outcome: 'started' } });
    expect(await output(daemon, (await waitRun(daemon, s.body.taskId)).taskId)).toContain(
      "Fix Sentry issue ⟦API-3⟧: ⟦TypeError: Cannot read properties of undefined (reading 'id')⟧",
    );
    expect((await deliver(daemon, 'sentry', sentry, { 'sentry-hook-signature': hex('other', sentry) })).status).toBe(401);
    const pd = payload('pagerduty-incident-triggered');
    // A secret being rotated: the old one's signature first, then the current one's.
    const signature = `v1=${hex('old-secret', pd)},v1=${hex(SECRETS.pagerduty, pd)}`;
    const p = await deliver(daemon, 'pagerduty', pd, { 'x-pagerduty-signature': signature, 'x-webhook-id': 'wh-1' });
    expect(p).toMatchObject({ status: 202, body: { outcome: 'started' } });
    expect(await output(daemon, (await waitRun(daemon, p.body.taskId)).taskId)).toContain('Incident ⟦A little bump in the road⟧ on ⟦API Service⟧');
    expect((await deliver(daemon, 'pagerduty', pd, { 'x-pagerduty-signature': `v1=${hex('old-secret', pd)}` })).status).toBe(401);
  });

  it('Grafana (HMAC of timestamp:body): signed now is taken; an old timestamp is a replay', async () => {
    const body = payload('grafana');
    const at = (ms: number) => {
      const ts = String(Math.floor(ms / 1000));
      return { 'x-grafana-alerting-signature': hex(SECRETS.grafana, `${ts}:${body}`), 'x-grafana-alerting-signature-timestamp': ts };
    };
    const ok = await deliver(daemon, 'grafana', body, at(Date.now()));
    expect(ok).toMatchObject({ status: 202, body: { outcome: 'started' } });
    expect(await output(daemon, (await waitRun(daemon, ok.body.taskId)).taskId)).toContain('Grafana says ⟦[FIRING:1] DiskFull Infra (db-1)⟧');
    expect((await deliver(daemon, 'grafana', body, at(Date.now() - 3_600_000))).status).toBe(401);
  });

  it('limits: past its rate a delivery is 429; past its concurrency a run waits in the queue', async () => {
    const send = (n: number) => deliver(daemon, 'limited', JSON.stringify({ n }), bearer('limited-token'));
    const answers = [await send(1), await send(2), await send(3)];
    expect(answers.map((a) => a.status)).toEqual([202, 202, 429]);
    expect(answers[2]!.body).toMatchObject({ code: 'rate_limited' });
    const first = await deliver(daemon, 'serial', JSON.stringify({ n: 1 }), bearer('serial-token'));
    const second = await deliver(daemon, 'serial', JSON.stringify({ n: 2 }), bearer('serial-token'));
    expect([first.body.outcome, second.body.outcome]).toEqual(['started', 'queued']);
    for (const { body } of [first, second]) await api(daemon, 'POST', `/api/headless/${body.taskId}/cancel`);
  });

  it('a template that reads what a delivery lacks refuses it, saying why; a body that is not JSON is 400', async () => {
    const refused = await deliver(daemon, 'plain', JSON.stringify({ other: 1 }), bearer('plain-token'));
    expect(refused).toMatchObject({ status: 422, body: { code: 'template_error', detail: expect.stringContaining('undefined variable: payload.n') } });
    expect(await deliver(daemon, 'plain', 'not json', bearer('plain-token'))).toMatchObject({ status: 400, body: { code: 'invalid_body' } });
    expect((await deliveries(daemon, 'plain')).map((d) => [d.outcome, d.reason])).toEqual([
      ['refused', 'the body is not valid JSON'],
      ['refused', expect.stringContaining('undefined variable: payload.n')],
    ]);
  });

  it('the list filter, the caller CLI, MCP and the metrics know triggers', async () => {
    const github = (await deliveries(daemon, 'github')).find((d) => d.outcome === 'started') as Record<string, any>;
    const listed = (await (await api(daemon, 'GET', '/api/headless?wsId=ops&trigger=github')).json()) as { runs: Array<Record<string, any>> };
    expect(listed.runs.map((r) => r.taskId)).toEqual([github.taskId]);
    const cli = await runCli(['triggers', 'deliveries', 'github', '--url', daemon.url, '--json'], { cwd });
    expect(JSON.parse(cli.stdout).deliveries.map((d: Record<string, unknown>) => d.id)).toEqual((await deliveries(daemon, 'github')).map((d) => d.id));
    const names = await runCli(['triggers', '--url', daemon.url], { cwd });
    expect(names.stdout).toContain('github  github (github)  workspace ops');
    expect(names.stdout).toContain('off  generic (bearer)  workspace ops  disabled');
    const mcp = new Client({ name: 'test', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${daemon.url}/mcp`)));
    const answer = (await mcp.callTool({ name: 'list_trigger_deliveries', arguments: { trigger: 'github', limit: 1 } })) as {
      structuredContent?: Record<string, any>;
    };
    expect(answer.structuredContent?.deliveries).toHaveLength(1);
    await mcp.close();
    const metrics = await (await api(daemon, 'GET', '/metrics')).text();
    expect(metrics).toMatch(/headless_trigger_deliveries_total\{trigger="github",outcome="started"\} 1\n/);
    expect(metrics).toMatch(/headless_trigger_deliveries_total\{trigger="github",outcome="deduplicated"\} 1\n/);
  });

  it('never shows a secret: not in the list, the deliveries, the answers or the logs', async () => {
    const list = JSON.stringify(await (await api(daemon, 'GET', '/api/triggers')).json());
    const logged = JSON.stringify(await deliveries(daemon, 'alerts'));
    for (const secret of Object.values(SECRETS)) {
      expect(list).not.toContain(secret);
      expect(logged).not.toContain(secret);
      expect(daemon.output()).not.toContain(secret);
    }
    expect(JSON.parse(list).triggers.find((t: Record<string, unknown>) => t.name === 'github')).toEqual({
      name: 'github',
      workspace: 'ops',
      sender: 'github',
      verify: 'github',
      enabled: true,
      agent: 'echo',
    });
  });
});

describe('trigger settings', () => {
  /** What `serve` says when it refuses to start with this one trigger. */
  async function refusedAtStart(trigger: Record<string, unknown>): Promise<string> {
    const cwd = tempDir();
    dirs.push(cwd);
    writeConfig(cwd, { triggers: [{ name: 'a', workspace: 'ws', ...trigger }] });
    const r = await runCli(['serve', '--port', '0'], { cwd });
    expect(r.code).not.toBe(0);
    return r.stderr;
  }

  it('an unknown template variable is a config error at start, naming the trigger', async () => {
    const said = await refusedAtStart({ sender: 'alertmanager', secret: 'x', prompt: 'Look at {{ paylod.status }}' });
    expect(said).toContain('triggers[0].prompt: unknown variable paylod.status');
  });

  it('a secret from an environment variable that is not set is a config error at start', async () => {
    const said = await refusedAtStart({ sender: 'github', secret: { env: 'NOT_SET_ANYWHERE' }, prompt: 'x' });
    expect(said).toContain('triggers[0].secret is empty (environment variable NOT_SET_ANYWHERE is not set)');
  });

  it('doctor checks each trigger: a missing secret is a problem (exit 1); a payload field the sender does not send is a warning', async () => {
    const cwd = tempDir();
    dirs.push(cwd);
    writeConfig(cwd, {
      agents: AGENTS,
      workspaces: [{ id: 'ops', path: '.', agents: ['echo'] }],
      triggers: [
        { name: 'typo', workspace: 'ops', sender: 'alertmanager', run: { agent: 'echo' }, secret: 'x', prompt: '{{ payload.commonLabel.alertname }}' },
        { name: 'nosecret', workspace: 'ops', sender: 'github', run: { agent: 'slow' }, secret: { env: 'NOT_SET_ANYWHERE' }, prompt: 'x' },
      ],
    });
    const r = await runCli(['doctor', '--json'], { cwd, timeoutMs: 240_000 });
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout).triggers).toEqual([
      { name: 'typo', problems: [], warnings: ["triggers[0].prompt reads payload.commonLabel.alertname, which the sender's example payload does not have"] },
      {
        name: 'nosecret',
        problems: ['triggers[1].secret is empty (environment variable NOT_SET_ANYWHERE is not set)', 'its agent slow is not enabled on workspace ops'],
        warnings: [],
      },
    ]);
  });

  it('a delivery seen before a restart is still deduplicated after it', async () => {
    const cwd = githubProject();
    const body = payload('github-issues-opened');
    const headers = { 'x-github-event': 'issues', 'x-github-delivery': 'd-1', 'x-hub-signature-256': await signGithub('s', body) };
    const before = await startDaemon(cwd);
    const first = await deliver(before, 'gh', body, headers);
    await waitRun(before, first.body.taskId);
    await before.stop();
    const after = await startDaemon(cwd);
    expect(await deliver(after, 'gh', body, headers)).toMatchObject({ status: 202, body: { outcome: 'deduplicated', taskId: first.body.taskId } });
    await after.stop();
  });
});

/** npm test installs Debian's Alertmanager as root; elsewhere this is skipped, saying so, except in CI, where it must run. */
const ALERTMANAGER = '/usr/bin/prometheus-alertmanager';
const hasAlertmanager = existsSync(ALERTMANAGER) || Boolean(process.env.CI);
if (!hasAlertmanager) console.warn('the real Alertmanager test is skipped: apt-get install prometheus-alertmanager');

/** A loopback port free a moment ago. */
const freePort = () =>
  new Promise<number>((done) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => done(port));
    });
  });

describe.skipIf(!hasAlertmanager)('a real Alertmanager (Debian prometheus-alertmanager)', () => {
  it('fires at the daemon with its bearer token from a file: the alert starts a run, its repeats do not', async () => {
    const cwd = tempDir();
    dirs.push(cwd);
    mkdirSync(join(cwd, 'ops'));
    const tokenFile = join(cwd, 'am-token');
    writeFileSync(tokenFile, 'the-alertmanager-token\n', { mode: 0o600 });
    writeConfig(cwd, {
      agents: AGENTS,
      workspaces: [{ id: 'ops', path: 'ops' }],
      triggers: [
        {
          name: 'am',
          workspace: 'ops',
          sender: 'alertmanager',
          run: { agent: 'echo' },
          secret: { file: tokenFile },
          prompt: 'Look at {{ payload.commonLabels.alertname }}: {{ payload.commonAnnotations.summary }}',
        },
      ],
    });
    const daemon = await startDaemon(cwd);
    const port = await freePort();
    writeFileSync(
      join(cwd, 'alertmanager.yml'),
      [
        'route:',
        '  receiver: headless',
        '  group_by: [alertname]',
        '  group_wait: 0s',
        '  group_interval: 1s',
        '  repeat_interval: 2s',
        'receivers:',
        '  - name: headless',
        '    webhook_configs:',
        `      - url: ${daemon.url}/api/triggers/am`,
        '        send_resolved: true',
        '        http_config:',
        '          authorization:',
        `            credentials_file: ${tokenFile}`,
        '',
      ].join('\n'),
    );
    const am = spawn(
      ALERTMANAGER,
      [
        `--config.file=${join(cwd, 'alertmanager.yml')}`,
        `--storage.path=${join(cwd, 'am-data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        '--cluster.listen-address=',
      ],
      {
        stdio: 'ignore',
      },
    );
    try {
      const alert = [{ labels: { alertname: 'DiskFull', severity: 'page' }, annotations: { summary: 'disk 95% full on db-1' } }];
      await waitFor(
        async () =>
          (
            await fetch(`http://127.0.0.1:${port}/api/v2/alerts`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify(alert),
            }).catch(() => undefined)
          )?.ok === true,
        {
          what: 'Alertmanager to take the alert',
        },
      );
      await waitFor(async () => (await deliveries(daemon, 'am')).some((d) => d.outcome === 'started'), { what: "Alertmanager's delivery to start a run" });
      const started = (await deliveries(daemon, 'am')).find((d) => d.outcome === 'started') as Record<string, any>;
      expect(await output(daemon, (await waitRun(daemon, started.taskId)).taskId)).toContain('Look at ⟦DiskFull⟧: ⟦disk 95% full on db-1⟧');
      // It repeats the firing group every repeat_interval (2 s here): each repeat names the same run.
      await waitFor(async () => (await deliveries(daemon, 'am')).some((d) => d.outcome === 'deduplicated'), { what: 'a repeat of the group' });
      const all = await deliveries(daemon, 'am');
      expect(all.filter((d) => d.outcome === 'started')).toHaveLength(1);
      expect(all.filter((d) => d.outcome === 'deduplicated').every((d) => d.taskId === started.taskId)).toBe(true);
    } finally {
      am.kill('SIGKILL');
      await daemon.stop();
    }
  }, 600_000);
});

describe('two instances on one PostgreSQL', () => {
  let postgres: TestPostgres | undefined;
  afterAll(async () => postgres?.stop());

  it('the same delivery sent to both at once, again and again: one run, every other answer names it', async () => {
    postgres = await startPostgres();
    const env = { HEADLESS_STORE_URL: await postgres.database() };
    const daemons = await Promise.all(
      [0, 1].map(() => {
        return startDaemon(githubProject(), undefined, env);
      }),
    );
    const body = payload('github-issues-opened');
    const headers = { 'x-github-event': 'issues', 'x-github-delivery': 'fleet-1', 'x-hub-signature-256': await signGithub('s', body) };
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => deliver(daemons[i % 2]!, 'gh', body, headers)));
    expect(answers.every((a) => a.status === 202)).toBe(true);
    const started = answers.filter((a) => a.body.outcome === 'started');
    expect(started).toHaveLength(1);
    // The rest name that run, also those sent while it was being started elsewhere (they wait for it).
    for (const a of answers.filter((a) => a.body.outcome !== 'started')) {
      expect(a.body.outcome).toBe('deduplicated');
      expect(a.body.taskId).toBe(started[0]!.body.taskId);
    }
    const runs = (await (await api(daemons[1]!, 'GET', '/api/headless?wsId=ops')).json()) as { runs: unknown[] };
    expect(runs.runs).toHaveLength(1);
    await Promise.all(daemons.map((d) => d.stop()));
  }, 600_000);
});
