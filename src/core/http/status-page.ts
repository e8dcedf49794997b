// whatwg-node's Response, as everywhere in the core.
import { Response } from '@whatwg-node/fetch';

/**
 * The status page served at `/` (README: Status page): runs per workspace, live from the event
 * streams, a run's timeline and output tail, the Inbox, cancel and retire. It uses the API like
 * any caller, behind the same gate. Data is only ever set as text (never parsed as HTML), and a
 * strict Content-Security-Policy allows this page's own script only and no framing.
 */

const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

const HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>headless-run-webhook</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d1d1f; background: #f6f6f7; }
  header { display: flex; gap: 1rem; align-items: center; padding: .6rem 1rem; background: #1d1d1f; color: #fff; }
  header h1 { font-size: 1rem; margin: 0; font-weight: 600; }
  main { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 1rem; padding: 1rem; }
  section { background: #fff; border-radius: 6px; padding: .8rem; box-shadow: 0 1px 2px #0002; min-width: 0; }
  h2 { font-size: .95rem; margin: 0 0 .5rem; }
  table { width: 100%; border-collapse: collapse; }
  td, th { text-align: left; padding: .25rem .4rem; border-bottom: 1px solid #eee; white-space: nowrap; }
  tr.run { cursor: pointer; } tr.run:hover, tr.selected { background: #eef4ff; }
  .status { font-weight: 600; } .running { color: #0a6cff; } .succeeded { color: #118a3e; }
  .failed, .timed_out, .interrupted { color: #c7221f; } .cancelled { color: #8a6d00; }
  pre { background: #f3f3f3; padding: .5rem; max-height: 16rem; overflow: auto; white-space: pre-wrap; word-break: break-all; margin: .3rem 0; }
  ol { padding-left: 1.4rem; max-height: 16rem; overflow: auto; margin: .3rem 0; } li { margin: .1rem 0; }
  .muted { color: #777; } .unread { font-weight: 600; }
  button { font: inherit; padding: .1rem .5rem; cursor: pointer; }
  #error { color: #c7221f; }
</style>
</head>
<body>
<header><h1>headless-run-webhook</h1>
  <label>Workspace <select id="workspace"></select></label>
  <span id="error" role="alert"></span>
</header>
<main>
  <div>
    <section><h2>Runs</h2>
      <table><thead><tr><th>Run</th><th>Status</th><th>Agent</th><th>Started</th><th>Took</th><th></th></tr></thead><tbody id="runs"></tbody></table>
    </section>
    <section id="inbox-section" style="margin-top:1rem"><h2>Inbox</h2><ul id="inbox"></ul></section>
  </div>
  <section id="detail"><h2>Run</h2><p class="muted" id="hint">Pick a run to see its timeline and output.</p>
    <div id="run" hidden>
      <div id="summary"></div>
      <p><button id="cancel" hidden>Cancel run</button> <button id="retire">Retire session</button> <span id="session" class="muted"></span></p>
      <h2>Timeline</h2><ol id="timeline"></ol>
      <h2>Output (last 4000 bytes)</h2><pre id="output"></pre>
    </div>
  </section>
</main>
<script src="app.js"></script>
</body>
</html>
`;

const APP = `'use strict';
const $ = (id) => document.getElementById(id);
const api = async (path, method = 'GET') => {
  const res = await fetch(path, method === 'POST' ? { method, headers: { 'content-type': 'application/json' }, body: '{}' } : {});
  const body = await res.json();
  if (!res.ok) throw new Error((body && body.detail) || res.status);
  return body;
};
const el = (tag, text, cls) => { const e = document.createElement(tag); if (text !== undefined) e.textContent = String(text); if (cls) e.className = cls; return e; };
const took = (r) => (r.durationMs === null ? '' : (r.durationMs / 1000).toFixed(1) + 's');
const showError = (e) => { $('error').textContent = e ? String(e.message || e) : ''; };
const live = new Map();
const MAX_LIVE = 4;
let workspace = '';
let selected = null;
let timelineSource = null;

function describe(e) {
  const d = e.data || {};
  const what = e.type === 'message' ? d.text : e.type === 'tool' ? d.name + ' ' + d.status : e.type === 'usage' ? d.inputTokens + ' in, ' + d.outputTokens + ' out'
    : e.type === 'error' ? d.message : e.type === 'run.ended' ? d.status : e.type === 'run.started' ? d.agent : '';
  return e.time.slice(11, 19) + '  ' + e.type + '  ' + (what || '');
}

function follow(taskId) {
  if (live.has(taskId) || live.size >= MAX_LIVE) return;
  const source = new EventSource('api/headless/' + encodeURIComponent(taskId) + '/events');
  live.set(taskId, source);
  source.addEventListener('run.ended', (m) => { source.close(); live.delete(taskId); updateRow(JSON.parse(m.data).data); });
  source.onerror = () => { source.close(); live.delete(taskId); };
}

function updateRow(record) {
  const row = document.querySelector('tr[data-task="' + CSS.escape(record.taskId) + '"]');
  if (row) row.replaceWith(runRow(record));
  if (selected === record.taskId) showRun(record.taskId, false);
}

function runRow(r) {
  const tr = el('tr', undefined, 'run' + (r.taskId === selected ? ' selected' : ''));
  tr.dataset.task = r.taskId;
  tr.append(el('td', r.taskId), el('td', r.status, 'status ' + r.status), el('td', r.agent), el('td', new Date(r.createdAt).toLocaleTimeString()), el('td', took(r)));
  const actions = el('td');
  if (r.status === 'running') {
    const b = el('button', 'Cancel');
    b.dataset.action = 'cancel';
    b.onclick = (ev) => { ev.stopPropagation(); cancel(r.taskId); };
    actions.append(b);
    follow(r.taskId);
  }
  tr.append(actions);
  tr.onclick = () => showRun(r.taskId, true);
  return tr;
}

async function refreshRuns() {
  if (!workspace) return;
  const { runs } = await api('api/headless?wsId=' + encodeURIComponent(workspace) + '&limit=50');
  $('runs').replaceChildren(...runs.map(runRow));
}

async function refreshInbox() {
  if (!workspace) return;
  const { items } = await api('api/workspaces/' + encodeURIComponent(workspace) + '/inbox?limit=20');
  $('inbox').replaceChildren(...items.map((i) => {
    const li = el('li', undefined, i.readAt ? '' : 'unread');
    li.append(el('span', i.title), el('span', '  ' + new Date(i.createdAt).toLocaleTimeString() + (i.taskId ? '  ' + i.taskId : ''), 'muted'));
    if (i.body) li.append(el('pre', i.body));
    if (!i.readAt) {
      const b = el('button', 'Mark read');
      b.onclick = () => api('api/workspaces/' + encodeURIComponent(workspace) + '/inbox/' + encodeURIComponent(i.id) + '/read', 'POST').then(refreshInbox, showError);
      li.append(b);
    }
    return li;
  }));
}

async function showRun(taskId, fresh) {
  selected = taskId;
  document.querySelectorAll('tr.run').forEach((tr) => tr.classList.toggle('selected', tr.dataset.task === taskId));
  const record = await api('api/headless/' + encodeURIComponent(taskId));
  $('hint').hidden = true;
  $('run').hidden = false;
  const lines = [record.taskId + '  ' + record.status + '  ' + record.agent + (record.durationMs === null ? '' : '  ' + took(record))];
  if (record.error) lines.push(record.error.code + ': ' + record.error.message);
  if (record.lastMessage) lines.push('Last message: ' + record.lastMessage);
  $('summary').replaceChildren(...lines.map((l, i) => el('div', l, i === 0 ? 'status ' + record.status : '')));
  $('cancel').hidden = record.status !== 'running';
  $('cancel').onclick = () => cancel(taskId);
  $('retire').onclick = () => api('api/sessions/' + encodeURIComponent(record.resumeId) + '/retire', 'POST').then(() => showRun(taskId, false), showError);
  const session = await api('api/sessions/' + encodeURIComponent(record.resumeId));
  $('session').textContent = 'session ' + session.resumeId + ': ' + session.status;
  const out = await api('api/headless/' + encodeURIComponent(taskId) + '/output?tail=4000');
  $('output').textContent = out.stdout + (out.stderr ? '\\n--- stderr ---\\n' + out.stderr : '');
  if (!fresh) return;
  if (timelineSource) timelineSource.close();
  $('timeline').replaceChildren();
  const source = new EventSource('api/headless/' + encodeURIComponent(taskId) + '/events');
  timelineSource = source;
  source.onmessage = null;
  for (const type of ['run.started', 'agent.session', 'message', 'tool', 'usage', 'error', 'run.ended']) {
    source.addEventListener(type, (m) => {
      const e = JSON.parse(m.data);
      $('timeline').append(el('li', describe(e)));
      if (type === 'run.ended') { source.close(); updateRow(e.data); }
    });
  }
  source.onerror = () => source.close();
}

function cancel(taskId) {
  api('api/headless/' + encodeURIComponent(taskId) + '/cancel', 'POST').then(() => showError(null), showError);
}

async function start() {
  const { workspaces } = await api('api/workspaces');
  $('workspace').replaceChildren(...workspaces.map((w) => el('option', w.tag ? w.id + ' (' + w.tag + ')' : w.id)));
  workspaces.forEach((w, i) => { $('workspace').options[i].value = w.id; });
  workspace = workspaces[0] ? workspaces[0].id : '';
  $('workspace').onchange = () => { workspace = $('workspace').value; selected = null; refreshRuns().catch(showError); refreshInbox().catch(showError); };
  await Promise.all([refreshRuns(), refreshInbox()]);
  setInterval(() => { refreshRuns().then(() => showError(null), showError); refreshInbox().catch(showError); }, 3000);
}
start().catch(showError);
`;

export function statusPage(): Response {
  return new Response(HTML, { status: 200, headers: { 'content-type': 'text/html; charset=utf-8', ...SECURITY_HEADERS } });
}

export function statusPageScript(): Response {
  return new Response(APP, { status: 200, headers: { 'content-type': 'text/javascript; charset=utf-8', ...SECURITY_HEADERS } });
}
