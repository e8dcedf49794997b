import { createHmac } from 'node:crypto';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { api, cleanupDaemons, startDaemon, tempDir, waitRun, writeConfig } from '../helpers/daemon';
import { waitFor } from '../helpers/wait';

/**
 * docs/triggers.md: Slack: a signed mention, through the built daemon, starts a run whose agent
 * never sees the bot token, and the run's reply is posted in the mention's thread, to a loopback
 * stand-in of Slack's Web API (`reply.slack.apiUrl`, for tests and proxies).
 */

const dirs: string[] = [];
const servers: Server[] = [];
afterAll(async () => {
  cleanupDaemons(dirs);
  for (const server of servers) server.closeAllConnections();
  await Promise.all(servers.map((server) => new Promise((done) => server.close(done))));
});

const SECRET = 'a-slack-signing-secret';
const TOKEN = 'xoxb-a-bot-token-the-agent-never-sees';

/** Slack's `chat.postMessage`, answered as Slack answers: `{ ok: true, … }`. */
async function slackStandIn() {
  const received: Array<{ path: string; authorization?: string; body: string }> = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      received.push({ path: req.url ?? '', authorization: req.headers.authorization, body });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: true, channel: 'C1', ts: '1700000001.000200' }));
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  servers.push(server);
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received };
}

describe('a Slack trigger through the built daemon', () => {
  it('a signed mention starts a run; its outcome is posted in the thread with the bot token, which the agent never had', async () => {
    const slack = await slackStandIn();
    const cwd = tempDir();
    dirs.push(cwd);
    writeConfig(cwd, {
      agents: { echo: { command: '/bin/sh', args: ['-c', 'cat; echo; printenv SLACK_BOT_TOKEN || echo token=unset'], stdin: '{prompt}' } },
      workspaces: [{ id: 'ops', path: '.' }],
      webhooks: { allowPrivateTargets: true },
      triggers: [
        {
          name: 'slack',
          workspace: 'ops',
          sender: 'slack',
          run: { agent: 'echo' },
          secret: { env: 'SLACK_SIGNING_SECRET' },
          prompt: 'Slack asks: {{ slack.text }}',
          when: { event: 'app_mention' },
          reply: { slack: { token: { env: 'SLACK_BOT_TOKEN' }, apiUrl: `${slack.url}/api` }, publicUrl: 'https://agents.example.com' },
        },
      ],
    });
    const daemon = await startDaemon(cwd, ['--port', '0'], { SLACK_SIGNING_SECRET: SECRET, SLACK_BOT_TOKEN: TOKEN });
    const body = JSON.stringify({
      team_id: 'T1',
      type: 'event_callback',
      event_id: 'Ev42',
      event_time: 1700000000,
      event: { type: 'app_mention', user: 'U1', text: '<@UAPP> look at the build', ts: '1700000000.000100', channel: 'C1' },
    });
    const ts = String(Math.floor(Date.now() / 1000));
    const signature = `v0=${createHmac('sha256', SECRET).update(`v0:${ts}:${body}`).digest('hex')}`;
    const res = await fetch(`${daemon.url}/api/triggers/slack`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-slack-request-timestamp': ts, 'x-slack-signature': signature },
      body,
    });
    expect(res.status).toBe(200);
    const { taskId } = (await res.json()) as { taskId: string };
    expect(await waitRun(daemon, taskId)).toMatchObject({ status: 'succeeded' });
    const output = ((await (await api(daemon, 'GET', `/api/headless/${taskId}/output`)).json()) as { stdout: string }).stdout;
    expect(output).toContain('Slack asks: ⟦<@UAPP> look at the build⟧');
    expect(output).toContain('token=unset');
    await waitFor(() => slack.received.length > 0, { what: 'the reply' });
    const [reply] = slack.received;
    expect(reply?.path).toBe('/api/chat.postMessage');
    expect(reply?.authorization).toBe(`Bearer ${TOKEN}`);
    expect(JSON.parse(reply?.body ?? '{}')).toMatchObject({
      channel: 'C1',
      thread_ts: '1700000000.000100',
      text: `Run <https://agents.example.com/#${taskId}|${taskId}> ended *succeeded*`,
    });
    await daemon.stop();
  }, 120_000);
});
