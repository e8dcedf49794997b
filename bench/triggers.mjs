// The triggers' figures for `npm run bench` (docs/triggers.md): a burst of 1000 Alertmanager
// deliveries (500 alert groups, each delivered twice, as Alertmanager repeats a group), 20 at a
// time, against a Hono route in a process of its own that checks the same bearer token and
// parses the same body (the baseline: a receiver that does no work). Run by bench/run.mjs.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))];
const TOKEN = 'a-bench-alertmanager-token';
const GROUPS = 500;
const PARALLEL = 20;

/** An Alertmanager payload for group `g`, as its webhook sends it. */
function alert(g) {
  const labels = { alertname: `Alert${g}`, severity: 'page', instance: `host-${g}:9100` };
  return JSON.stringify({
    receiver: 'headless',
    status: 'firing',
    alerts: [
      {
        status: 'firing',
        labels,
        annotations: { summary: `alert ${g} fired` },
        startsAt: '2026-11-25T10:00:00Z',
        endsAt: '0001-01-01T00:00:00Z',
        generatorURL: 'http://prometheus:9090/graph',
        fingerprint: `fp${g}`,
      },
    ],
    groupLabels: { alertname: labels.alertname },
    commonLabels: labels,
    commonAnnotations: { summary: `alert ${g} fired` },
    externalURL: 'http://alertmanager:9093',
    version: '4',
    groupKey: `{}:{alertname="${labels.alertname}"}`,
    truncatedAlerts: 0,
  });
}

/** Sends every body to `url`, PARALLEL at a time; each answer's time and body. */
async function burst(url, bodies) {
  const answers = [];
  let next = 0;
  const worker = async () => {
    while (next < bodies.length) {
      const body = bodies[next++];
      const at = performance.now();
      const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` }, body });
      const answer = await res.json().catch(() => ({}));
      answers.push({ ms: performance.now() - at, status: res.status, answer });
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: PARALLEL }, worker));
  return { answers, seconds: (performance.now() - started) / 1000 };
}

export async function triggerBurst({ daemon, nodes, row, rssMb, tempDir, spawnServer, baselineServer }) {
  // Each group's first delivery, then its repeat, interleaved: the repeats arrive while the first ones are handled.
  const bodies = [];
  for (let g = 0; g < GROUPS; g += 10) for (const round of [0, 1]) for (let i = g; i < g + 10; i++) bodies.push(alert(i) + ' '.repeat(round));
  const base = await spawnServer([baselineServer], { env: { ...process.env, MODE: 'hono-receiver', TOKEN } });
  await burst(`${base.url}/api/triggers/alerts`, bodies.slice(0, 100));
  const baseline = await burst(`${base.url}/api/triggers/alerts`, bodies);
  await base.stop();
  for (const [version, node] of nodes)
    await burstOn({ daemon, node, label: `Node ${version}, ${sqliteDriver(version)}`, bodies, baseline, row, rssMb, tempDir });
}

/** The SQLite driver the daemon uses on Node `version` (src/core/store/sql-database.ts). */
function sqliteDriver(version) {
  const [major, minor] = version.split('.').map(Number);
  return major > 22 || (major === 22 && minor >= 13) ? 'node:sqlite' : '@photostructure/sqlite';
}

async function burstOn({ daemon, node, label, bodies, baseline, row, rssMb, tempDir }) {
  const gate = join(tempDir(), 'go');
  // Its runs wait on a file, so the burst measures the deliveries, not 500 agents starting.
  const hold = { command: '/bin/sh', args: ['-c', `while [ ! -f '${gate}' ]; do sleep 0.05; done`], stdin: '{prompt}' };
  const d = await daemon(
    {
      agents: { hold },
      workspaces: [{ id: 'ops', path: '.', agents: ['hold'] }],
      queue: { max: 2000 },
      triggers: [
        {
          name: 'alerts',
          workspace: 'ops',
          sender: 'alertmanager',
          agent: 'hold',
          secret: TOKEN,
          prompt: 'Investigate {{ payload.commonLabels.alertname }}: {{ payload.commonAnnotations.summary }}',
        },
      ],
    },
    tempDir(),
    process.env,
    node,
  );
  // Warmed as the receiver is, with groups of their own (their runs are not counted below).
  await burst(
    `${d.url}/api/triggers/alerts`,
    Array.from({ length: 100 }, (_, i) => alert(GROUPS + i)),
  );
  const idle = rssMb(d.pid);
  const ours = await burst(`${d.url}/api/triggers/alerts`, bodies);
  const grown = rssMb(d.pid) - idle;
  writeFileSync(gate, '');
  await d.stop();
  const runs = new Set(ours.answers.filter((a) => a.answer.outcome === 'started' || a.answer.outcome === 'queued').map((a) => a.answer.taskId));
  const deduplicated = ours.answers.filter((a) => a.answer.outcome === 'deduplicated').length;
  const refused = ours.answers.filter((a) => a.status !== 202).length;
  const rate = bodies.length / ours.seconds;
  const baseRate = bodies.length / baseline.seconds;
  row(
    `trigger burst (${label}): verified deliveries/s (1000 Alertmanager deliveries, 20 at a time)`,
    `${rate.toFixed(0)}/s`,
    `${baseRate.toFixed(0)}/s Hono receiver (bearer + JSON)`,
    `${(rate / baseRate).toFixed(2)}×`,
    '≥ 1000/s',
    rate >= 1000,
  );
  const p99 = pct(
    ours.answers.map((a) => a.ms),
    99,
  );
  row(
    `trigger burst (${label}): answer p99`,
    `${p99.toFixed(1)} ms`,
    `${pct(
      baseline.answers.map((a) => a.ms),
      99,
    ).toFixed(1)} ms`,
    `p50 ${pct(
      ours.answers.map((a) => a.ms),
      50,
    ).toFixed(1)} ms`,
    '≤ 100 ms',
    p99 <= 100,
  );
  row(
    `trigger burst (${label}): runs started or queued, repeats`,
    `${runs.size} runs, ${deduplicated} repeats, ${refused} refused`,
    `${GROUPS} groups`,
    runs.size === GROUPS && deduplicated === GROUPS ? 'none doubled' : 'WRONG',
    `exactly ${GROUPS}`,
    runs.size === GROUPS && refused === 0,
  );
  row(
    `trigger burst (${label}): daemon RSS growth`,
    `+${grown.toFixed(1)} MB`,
    `${idle.toFixed(1)} MB before`,
    `+${grown.toFixed(1)} MB`,
    '≤ 30 MB',
    grown <= 30,
  );
}
