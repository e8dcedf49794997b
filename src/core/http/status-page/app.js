// The status page's script (served as /app.js; the page's CSP allows nothing else).

const $ = (id) => document.getElementById(id);
const api = async (path, method = 'GET') => {
  const res = await fetch(path, method === 'POST' ? { method, headers: { 'content-type': 'application/json' }, body: '{}' } : {});
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
const took = (r) => (r.durationMs === null ? '' : `${(r.durationMs / 1000).toFixed(1)}s`);
const showError = (e) => {
  $('error').textContent = e ? String(e.message || e) : '';
};
const live = new Map();
const MAX_LIVE = 4;
let workspace = '';
let selected = null;
let timelineSource = null;

function describe(e) {
  const d = e.data || {};
  const what =
    e.type === 'message'
      ? d.text
      : e.type === 'tool'
        ? `${d.name} ${d.status}`
        : e.type === 'usage'
          ? `${d.inputTokens} in, ${d.outputTokens} out`
          : e.type === 'error'
            ? d.message
            : e.type === 'run.ended'
              ? d.status
              : e.type === 'run.started'
                ? d.agent
                : '';
  return `${e.time.slice(11, 19)}  ${e.type}  ${what || ''}`;
}

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
  tr.append(
    el('td', r.title ?? r.taskId, r.title ? 'titled' : undefined),
    el('td', r.status === 'queued' ? `queued #${r.queuePosition ?? '?'}` : r.status, `status ${r.status}`),
    el('td', r.agent),
    el('td', new Date(r.createdAt).toLocaleTimeString()),
    el('td', took(r)),
  );
  const actions = el('td');
  if (r.status === 'running' || r.status === 'queued') {
    const b = el('button', 'Cancel');
    b.dataset.action = 'cancel';
    b.onclick = (ev) => {
      ev.stopPropagation();
      cancel(r.taskId);
    };
    actions.append(b);
    follow(r.taskId);
  }
  tr.append(actions);
  tr.onclick = () => showRun(r.taskId, true);
  return tr;
}

async function refreshRuns() {
  if (!workspace) return;
  const { runs } = await api(`api/headless?wsId=${encodeURIComponent(workspace)}&limit=50`);
  $('runs').replaceChildren(...runs.map(runRow));
}

async function refreshInbox() {
  if (!workspace) return;
  const { items } = await api(`api/workspaces/${encodeURIComponent(workspace)}/inbox?limit=20`);
  $('inbox').replaceChildren(
    ...items.map((i) => {
      const li = el('li', undefined, i.readAt ? '' : 'unread');
      li.append(el('span', i.title), el('span', `  ${new Date(i.createdAt).toLocaleTimeString()}${i.taskId ? `  ${i.taskId}` : ''}`, 'muted'));
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

async function showRun(taskId, fresh) {
  selected = taskId;
  for (const tr of document.querySelectorAll('tr.run')) tr.classList.toggle('selected', tr.dataset.task === taskId);
  const record = await api(`api/headless/${encodeURIComponent(taskId)}`);
  $('hint').hidden = true;
  $('run').hidden = false;
  const lines = [
    `${record.title ? `${record.title}  ` : ''}${record.taskId}  ${record.status}  ${record.agent}${record.durationMs === null ? '' : `  ${took(record)}`}`,
  ];
  if (record.error) lines.push(`${record.error.code}: ${record.error.message}`);
  if (record.lastMessage) lines.push(`Last message: ${record.lastMessage}`);
  $('summary').replaceChildren(...lines.map((l, i) => el('div', l, i === 0 ? `status ${record.status}` : '')));
  $('cancel').hidden = record.status !== 'running' && record.status !== 'queued';
  $('cancel').onclick = () => cancel(taskId);
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
  source.onmessage = null;
  for (const type of ['run.started', 'agent.session', 'message', 'tool', 'usage', 'error', 'run.ended']) {
    source.addEventListener(type, (m) => {
      const e = JSON.parse(m.data);
      $('timeline').append(el('li', describe(e)));
      if (type === 'run.ended') {
        source.close();
        updateRow(e.data);
      }
    });
  }
  source.onerror = () => source.close();
}

function cancel(taskId) {
  api(`api/headless/${encodeURIComponent(taskId)}/cancel`, 'POST').then(() => showError(null), showError);
}

async function start() {
  const { workspaces } = await api('api/workspaces');
  $('workspace').replaceChildren(...workspaces.map((w) => el('option', w.tag ? `${w.id} (${w.tag})` : w.id)));
  workspaces.forEach((w, i) => {
    $('workspace').options[i].value = w.id;
  });
  workspace = workspaces[0] ? workspaces[0].id : '';
  $('workspace').onchange = () => {
    workspace = $('workspace').value;
    selected = null;
    refreshRuns().catch(showError);
    refreshInbox().catch(showError);
  };
  await Promise.all([refreshRuns(), refreshInbox()]);
  setInterval(() => {
    refreshRuns().then(() => showError(null), showError);
    refreshInbox().catch(showError);
  }, 3000);
}
start().catch(showError);
