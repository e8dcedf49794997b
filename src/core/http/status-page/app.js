// The status page's script (served as /app.js; the page's CSP allows nothing else). Data is only ever set as text.

const $ = (id) => document.getElementById(id);
const api = async (path, method = 'GET', sent = {}) => {
  const res = await fetch(path, method === 'POST' ? { method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(sent) } : {});
  const body = await res.json();
  if (!res.ok) throw new Error(body?.detail || res.status);
  return body;
};
const el = (tag, text, cls) => {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
};
const seconds = (ms) => (ms < 60_000 ? `${(ms / 1000).toFixed(1)}s` : `${Math.floor(ms / 60_000)}m ${Math.round((ms % 60_000) / 1000)}s`);
const ended = (r) => r.status !== 'running' && r.status !== 'queued';
/** Its duration once ended; while running, the time since it started (kept current every second). */
const took = (r) =>
  r.durationMs !== null ? seconds(r.durationMs) : r.status === 'running' ? seconds(Date.now() - Date.parse(r.startedAt ?? r.createdAt)) : '';
const label = (r) => r.title ?? `${r.agent} ${r.taskId.slice(-8)}`;
const showError = (e) => {
  $('error').textContent = e ? String(e.message || e) : '';
};
const live = new Map();
const MAX_LIVE = 4;
const PAGE = 20;
let workspace = '';
let selected = null;
let timelineSource = null;
/** The cursors of the pages before this one; this page's. */
let earlier = [];
let cursor = '';

function follow(taskId) {
  if (live.has(taskId) || live.size >= MAX_LIVE) return;
  const source = new EventSource(`api/headless/${encodeURIComponent(taskId)}/events`);
  live.set(taskId, source);
  source.addEventListener('run.ended', (m) => {
    source.close();
    live.delete(taskId);
    updateRow(JSON.parse(m.data).data);
  });
  source.onerror = () => {
    source.close();
    live.delete(taskId);
  };
}

function updateRow(record) {
  const row = document.querySelector(`tr[data-task="${CSS.escape(record.taskId)}"]`);
  if (row) row.replaceWith(runRow(record));
  if (selected === record.taskId) showRun(record.taskId, false).catch(showError);
}

function runRow(r) {
  const tr = el('tr', undefined, `run${r.taskId === selected ? ' selected' : ''}`);
  tr.dataset.task = r.taskId;
  const name = el('td', undefined, 'name');
  const link = el('a', label(r));
  link.href = `#${r.taskId}`;
  link.title = `${r.taskId}, started ${new Date(r.createdAt).toLocaleString()}`;
  name.append(link);
  const time = el('td', took(r), 'time');
  if (r.status === 'running') time.dataset.since = r.startedAt ?? r.createdAt;
  tr.append(name, el('td', r.status === 'queued' ? `queued #${r.queuePosition ?? '?'}` : r.status, `status ${r.status}`), el('td', r.agent, 'wide'), time);
  const actions = el('td');
  if (!ended(r)) {
    const b = el('button', 'Cancel');
    b.dataset.action = 'cancel';
    b.setAttribute('aria-label', `Cancel ${label(r)}`);
    b.onclick = (ev) => {
      ev.stopPropagation();
      cancel(r);
    };
    actions.append(b);
    follow(r.taskId);
  }
  tr.append(actions);
  tr.onclick = () => {
    location.hash = r.taskId;
  };
  return tr;
}

function filterQuery() {
  const q = new URLSearchParams({ wsId: workspace, limit: String(PAGE) });
  for (const [key, id] of [
    ['status', 'f-status'],
    ['agent', 'f-agent'],
    ['schedule', 'f-schedule'],
    ['trigger', 'f-trigger'],
    ['metadata', 'f-metadata'],
  ]) {
    const value = $(id).value.trim();
    if (value) q.set(key, value);
  }
  if (cursor) q.set('cursor', cursor);
  return q;
}

async function refreshRuns() {
  if (!workspace) return;
  const q = filterQuery();
  const filtered = [...q.keys()].some((k) => !['wsId', 'limit', 'cursor'].includes(k));
  let page;
  try {
    page = await api(`api/headless?${q}`);
  } catch (error) {
    $('runs-state').textContent = `Could not load the runs: ${error.message}`;
    return;
  }
  $('runs').replaceChildren(...page.runs.map(runRow));
  $('runs-state').textContent = page.runs.length > 0 ? '' : filtered ? 'No runs match these filters.' : 'No runs yet in this workspace.';
  $('older').disabled = page.nextCursor === null;
  $('older').onclick = () => {
    earlier.push(cursor);
    cursor = page.nextCursor;
    refreshRuns().catch(showError);
  };
  $('newest').disabled = earlier.length === 0;
  $('page').textContent = `page ${earlier.length + 1}`;
}

async function refreshInbox() {
  if (!workspace) return;
  const { items } = await api(`api/workspaces/${encodeURIComponent(workspace)}/inbox?limit=20`);
  $('inbox-state').textContent = items.length > 0 ? '' : 'The Inbox is empty.';
  $('inbox').replaceChildren(
    ...items.map((i) => {
      const li = el('li', undefined, i.readAt ? '' : 'unread');
      li.append(el('span', i.title), el('span', `  ${new Date(i.createdAt).toLocaleTimeString()}`, 'muted'));
      if (i.taskId) {
        const a = el('a', ' run');
        a.href = `#${i.taskId}`;
        li.append(a);
      }
      if (i.body) li.append(el('pre', i.body));
      if (!i.readAt) {
        const b = el('button', 'Mark read');
        b.onclick = () => api(`api/workspaces/${encodeURIComponent(workspace)}/inbox/${encodeURIComponent(i.id)}/read`, 'POST').then(refreshInbox, showError);
        li.append(b);
      }
      return li;
    }),
  );
}

/** The deliveries of one of the workspace's triggers (the newest 50), every outcome or one: what the CLI's `trigger deliveries` shows. */
async function refreshTriggers() {
  if (!workspace) return;
  const mine = (await api('api/triggers')).triggers.filter((t) => t.workspace === workspace);
  $('triggers-section').hidden = mine.length === 0;
  if (mine.length === 0) return;
  const picked = mine.some((t) => t.name === $('t-name').value) ? $('t-name').value : mine[0].name;
  $('t-name').replaceChildren(
    ...mine.map((t) => {
      const o = el('option', `${t.name} (${t.sender}${t.enabled ? '' : ', disabled'})`);
      o.value = t.name;
      return o;
    }),
  );
  $('t-name').value = picked;
  const { deliveries, unverified } = await api(`api/triggers/${encodeURIComponent(picked)}/deliveries?limit=50`);
  const outcome = $('t-outcome').value;
  const shown = deliveries.filter((d) => !outcome || d.outcome === outcome);
  const refused = unverified.count > 0 ? ` ${unverified.count} failed verification since ${new Date(unverified.since).toLocaleString()} (not listed).` : '';
  $('triggers-state').textContent = `${shown.length ? '' : `No ${outcome || ''} deliveries among the newest 50.`}${refused}`.trim();
  $('deliveries').replaceChildren(...shown.map(deliveryRow));
}

function deliveryRow(d) {
  const tr = el('tr');
  const run = el('td');
  if (d.taskId) {
    const a = el('a', d.taskId.slice(-8));
    a.href = `#${d.taskId}`;
    run.append(a);
  }
  const what = [d.event, d.status, d.deliveryId && `(${d.deliveryId})`].filter(Boolean).join(' ');
  tr.append(el('td', new Date(d.receivedAt).toLocaleString()), el('td', d.outcome, `outcome-${d.outcome}`), el('td', what), el('td', d.reason ?? ''), run);
  return tr;
}

const usd = (n) => `$${n > 0 && n < 0.01 ? n.toFixed(4) : n.toFixed(2)}`;
const tokens = (n) => (n >= 10_000 ? `${(n / 1000).toFixed(n >= 100_000 ? 0 : 1)}k` : String(n));

/** One row of the Costs: a day's totals (bold), or one workspace's, agent's, schedule's or trigger's in it; the estimated part said. */
function costRow(label, f, day) {
  const tr = el('tr', undefined, day ? 'day' : '');
  const cost = el('td', usd(f.costUsd), 'num');
  if (f.estimatedCostUsd > 0) cost.append(el('span', `${usd(f.estimatedCostUsd)} estimated`, 'est'));
  tr.append(el('td', label, day ? '' : 'scope'), el('td', f.runs, 'num'), el('td', `${tokens(f.inputTokens)} / ${tokens(f.outputTokens)}`, 'num'), cost);
  return tr;
}

/** Each daily limit in force beside what today (UTC, the report's first day) used of it. */
function limitItems(report) {
  const today = report.days[0];
  const item = (who, limits, used = { runs: 0, costUsd: 0 }) => {
    const parts = [];
    if (limits.runsPerDay !== undefined) parts.push(`${used.runs} of ${limits.runsPerDay} runs`);
    if (limits.spendPerDayUsd !== undefined) parts.push(`${usd(used.costUsd)} of ${usd(limits.spendPerDayUsd)}`);
    const reached =
      (limits.runsPerDay !== undefined && used.runs >= limits.runsPerDay) || (limits.spendPerDayUsd !== undefined && used.costUsd >= limits.spendPerDayUsd);
    const text = parts.length > 0 ? `${who}: ${parts.join(', ')} today${reached ? ': reached' : ''}` : `${who}: no daily limit`;
    return el('li', text, reached ? 'over' : '');
  };
  return [
    ...Object.entries(report.limits.workspaces).map(([id, l]) => item(`workspace ${id}`, l, today?.workspaces[id])),
    ...Object.entries(report.limits.schedules).map(([name, l]) => item(`schedule ${name}`, l, today?.schedules[name])),
    ...Object.entries(report.limits.triggers).map(([name, l]) => item(`trigger ${name}`, l, today?.triggers[name])),
  ];
}

/** Spend and tokens per day (docs/status-page.md: Costs): this workspace's, or every one's. */
async function refreshCosts() {
  if (!workspace) return;
  const days = $('c-days').value;
  const q = new URLSearchParams({ days });
  if ($('c-scope').value !== 'all') q.set('workspaceId', workspace);
  let report;
  try {
    report = await api(`api/usage?${q}`);
  } catch (error) {
    $('costs-state').textContent = `Could not load the costs: ${error.message}`;
    return;
  }
  const rows = [];
  for (const d of report.days) {
    if (d.total.runs === 0) continue;
    rows.push(costRow(d.day, d.total, true));
    for (const [kind, of] of [
      ['workspace', d.workspaces],
      ['agent', d.agents],
      ['schedule', d.schedules],
      ['trigger', d.triggers],
    ])
      for (const [name, f] of Object.entries(of)) rows.push(costRow(`${kind} ${name}`, f, false));
  }
  $('costs').replaceChildren(...rows);
  $('costs-state').textContent =
    rows.length > 0
      ? 'An estimated cost is reckoned from token counts at list prices; a run whose agent reports no cost counts $0.'
      : `No runs ${days === '1' ? 'today' : `in the last ${days} days`}.`;
  $('limits').replaceChildren(...limitItems(report));
}

/** The workspace's questions waiting for an answer (docs/approvals.md), each with its buttons. */
async function refreshQuestions() {
  if (!workspace) return;
  const { approvals } = await api(`api/approvals?workspace=${encodeURIComponent(workspace)}&status=pending`);
  $('questions-section').hidden = approvals.length === 0;
  $('questions').replaceChildren(...approvals.map(question));
}

function question(a) {
  const li = el('li');
  li.dataset.approval = a.id;
  const what = `${a.tool.kind ? `${a.tool.kind}: ` : ''}${a.tool.title}`;
  li.append(el('div', what, 'what'));
  // Every argument, as the service shows it (invisible characters escaped): what Allow allows.
  if (a.tool.input) li.append(el('pre', a.tool.input));
  if (a.tool.truncated) li.append(el('div', 'Cut where marked: this is not the whole request.', 'cut'));
  if (a.tool.paths.length > 0) li.append(el('div', a.tool.paths.join(', '), 'muted'));
  const run = el('a', `${a.agent} ${a.taskId.slice(-8)}`);
  run.href = `#${a.taskId}`;
  const until = el('span', ` · ${a.fallback} at ${new Date(a.expiresAt).toLocaleTimeString()} unless answered `, 'muted');
  const answer = (decision) => () =>
    api(`api/approvals/${encodeURIComponent(a.id)}`, 'POST', { decision }).then(() => {
      showError(null);
      refreshQuestions().catch(showError);
    }, showError);
  const allow = el('button', 'Allow');
  allow.onclick = answer('allow');
  const deny = el('button', 'Deny');
  deny.onclick = answer('deny');
  li.append(run, until, allow, deny);
  return li;
}

/** One event of the timeline as part of the conversation: messages as text, tool calls by name, never raw JSON. */
function render(e) {
  const d = e.data || {};
  if (e.type === 'message') return el('li', d.text, 'msg');
  if (e.type === 'tool') {
    const li = el('li', `⚙ ${d.name} ${d.status === 'started' ? '…' : d.status}`, `tool ${d.status}`);
    if (d.id) li.dataset.tool = d.id;
    return li;
  }
  if (e.type === 'error') return el('li', d.message, 'err');
  if (e.type === 'usage') return el('li', `${d.inputTokens} tokens in, ${d.outputTokens} out${d.costUsd === undefined ? '' : `, $${d.costUsd}`}`, 'note');
  if (e.type === 'run.started') return el('li', `${e.time.slice(11, 19)} run.started: ${d.agent}`, 'note');
  if (e.type === 'run.queued') return el('li', `${e.time.slice(11, 19)} queued`, 'note');
  if (e.type === 'run.ended') return el('li', `${e.time.slice(11, 19)} run.ended: ${d.status}`, 'note');
  if (e.type === 'agent.session') return el('li', 'agent.session: the session can be resumed', 'note');
  if (e.type === 'permission.requested') return el('li', `asks: ${d.tool.kind ? `${d.tool.kind}: ` : ''}${d.tool.title}`, 'note ask');
  if (e.type === 'follow-up') return el('li', `follow-up ${d.state} (${d.chars} characters)`, 'note');
  if (e.type === 'verify.checked')
    return el('li', `check ${d.name}: ${d.passed ? 'passed' : d.timedOut ? 'timed out' : `failed (exit ${d.exitCode})`}`, d.passed ? 'note' : 'err');
  if (e.type === 'verify.verdict') return el('li', `checks, attempt ${d.attempt}: ${d.verdict}`, 'note');
  if (e.type === 'permission.answered')
    return el('li', `${d.decision === 'allow' ? 'allowed' : 'denied'} by ${d.by === 'caller' ? 'a caller' : 'its fallback'}`, 'note');
  return undefined;
}

function append(e) {
  const item = render(e);
  if (!item) return;
  // A tool call's end replaces its start: one line per call.
  const open = e.type === 'tool' && e.data.id ? $('timeline').querySelector(`li[data-tool="${CSS.escape(e.data.id)}"]`) : null;
  if (open) open.replaceWith(item);
  else $('timeline').append(item);
}

async function showRun(taskId, fresh) {
  selected = taskId;
  for (const tr of document.querySelectorAll('tr.run')) tr.classList.toggle('selected', tr.dataset.task === taskId);
  const record = await api(`api/headless/${encodeURIComponent(taskId)}`);
  $('hint').hidden = true;
  $('run').hidden = false;
  const lines = [`${label(record)} · ${record.status} · ${record.agent}${record.durationMs === null ? '' : ` · ${took(record)}`}`, record.taskId];
  // Which rule chose its agent (docs/http-api.md: Agent selection), when its start did not name one.
  lines.push(`Workspace ${record.workspaceId}`);
  if (record.agentChosenBy && record.agentChosenBy !== 'asked')
    lines.push(`Agent ${record.agent}: ${AGENT_RULE_SAID[record.agentChosenBy] ?? record.agentChosenBy}`);
  if (record.source?.kind === 'schedule') lines.push(`Started by schedule ${record.source.name} for ${record.source.scheduledFor}`);
  if (record.source?.kind === 'trigger') lines.push(`Started by trigger ${record.source.name} (delivery ${record.source.delivery})`);
  if (record.error) lines.push(`${record.error.code}: ${record.error.message}`);
  if (record.lastMessage) lines.push(`Last message: ${record.lastMessage}`);
  // Its verify loop (docs/verify.md): one line per attempt, each failing check with its exit.
  for (const a of record.verify?.attempts ?? []) {
    const failing = a.checks.filter((c) => !c.passed).map((c) => `${c.name} (${c.timedOut ? 'timed out' : `exit ${c.exitCode}`})`);
    lines.push(`Checks, attempt ${a.attempt}: ${a.passed ? 'passed' : `failing ${failing.join(', ')}`}`);
  }
  if (record.verify) lines.push(`Verify: ${record.verify.verdict}`);
  $('summary').replaceChildren(...lines.map((l, i) => el('div', l, i === 0 ? `status ${record.status}` : 'muted')));
  $('cancel').hidden = ended(record);
  $('cancel').onclick = () => cancel(record);
  // A running run's agent takes a follow-up at its next turn (docs/http-api.md: Follow-ups).
  $('follow-up').hidden = record.status !== 'running';
  $('follow-up').onsubmit = (event) => {
    event.preventDefault();
    const text = $('follow-up-text').value;
    api(`api/headless/${encodeURIComponent(taskId)}/messages`, 'POST', { text }).then(() => {
      $('follow-up-text').value = '';
      showError(null);
    }, showError);
  };
  $('retire').onclick = () => api(`api/sessions/${encodeURIComponent(record.resumeId)}/retire`, 'POST').then(() => showRun(taskId, false), showError);
  const session = await api(`api/sessions/${encodeURIComponent(record.resumeId)}`);
  $('session').textContent = `session ${session.resumeId}: ${session.status}`;
  const out = await api(`api/headless/${encodeURIComponent(taskId)}/output?tail=4000`);
  $('output').textContent = out.stdout + (out.stderr ? `\n--- stderr ---\n${out.stderr}` : '');
  if (!fresh) return;
  if (timelineSource) timelineSource.close();
  $('timeline').replaceChildren();
  const source = new EventSource(`api/headless/${encodeURIComponent(taskId)}/events`);
  timelineSource = source;
  // Every type of event a run has (served with this script: src/core/http/status-page/index.ts).
  const types = RUN_EVENT_TYPES;
  for (const type of types) {
    source.addEventListener(type, (m) => {
      const e = JSON.parse(m.data);
      append(e);
      if (type === 'run.ended') {
        source.close();
        updateRow(e.data);
      }
    });
  }
  source.onerror = () => source.close();
}

function cancel(r) {
  if (!confirm(`Cancel ${label(r)}? Its agent is stopped.`)) return;
  api(`api/headless/${encodeURIComponent(r.taskId)}/cancel`, 'POST').then(() => showError(null), showError);
}

function reload() {
  refreshRuns().then(() => showError(null), showError);
  refreshInbox().catch(showError);
  refreshQuestions().catch(showError);
  refreshTriggers().catch(showError);
}

async function start() {
  const { workspaces } = await api('api/workspaces');
  $('workspace').replaceChildren(...workspaces.map((w) => el('option', w.tag ? `${w.id} (${w.tag})` : w.id)));
  workspaces.forEach((w, i) => {
    $('workspace').options[i].value = w.id;
  });
  workspace = workspaces[0] ? workspaces[0].id : '';
  const fromStart = () => {
    earlier = [];
    cursor = '';
    reload();
  };
  $('workspace').onchange = () => {
    workspace = $('workspace').value;
    fromStart();
    refreshCosts().catch(showError);
  };
  $('costs-filters').onchange = () => refreshCosts().catch(showError);
  $('triggers-filters').onchange = () => refreshTriggers().catch(showError);
  $('triggers-filters').onsubmit = (ev) => ev.preventDefault();
  $('costs-filters').onsubmit = (ev) => ev.preventDefault();
  $('filters').onchange = fromStart;
  $('filters').onsubmit = (ev) => {
    ev.preventDefault();
    fromStart();
  };
  $('newest').onclick = fromStart;
  window.onhashchange = () => location.hash.length > 1 && showRun(decodeURIComponent(location.hash.slice(1)), true).catch(showError);
  await Promise.all([refreshRuns(), refreshInbox(), refreshQuestions(), refreshCosts(), refreshTriggers()]);
  window.onhashchange();
  setInterval(reload, 3000);
  // The costs sum up to 90 days of records: read less often than the runs.
  setInterval(() => refreshCosts().catch(showError), 30_000);
  setInterval(() => {
    for (const td of document.querySelectorAll('td.time[data-since]')) td.textContent = seconds(Date.now() - Date.parse(td.dataset.since));
  }, 1000);
}
start().catch(showError);
