#!/usr/bin/env node
// The GET baselines, each in a process of its own as the daemon is (in the load generator's
// process a server would share its thread and look slower than it is). BODY (env) is answered
// as JSON: by node:http alone (MODE=bare), through @whatwg-node/server with a handler that only
// returns it (MODE=whatwg-node, the layer the handler is built on), or by a Hono route
// `GET /api/headless/:taskId` on @hono/node-server (MODE=hono, the peer a user might pick), or that
// route doing the daemon's work (MODE=hono-store: the fair peer).
import { timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import { serve } from '@hono/node-server';
import { Response, createServerAdapter } from '@whatwg-node/server';
import { Hono } from 'hono';

const body = process.env.BODY ?? '{}';
const headers = { 'content-type': 'application/json' };
const announce = (port) => process.stdout.write(`listening on http://127.0.0.1:${port}\n`);
if (process.env.MODE === 'hono-receiver') {
  // A webhook receiver that does no work: the bearer token checked, the body parsed, 202.
  const app = new Hono();
  app.post('/api/triggers/:name', async (c) => {
    if (c.req.header('authorization') !== `Bearer ${process.env.TOKEN}`) return c.body('{}', 401, headers);
    JSON.parse(await c.req.text());
    return c.body('{"outcome":"started"}', 202, headers);
  });
  serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => announce(info.port));
} else if (process.env.MODE === 'hono-store') {
  // The fair peer: the same route checking the same bearer token and reading the same record from
  // the daemon's SQLite file (DB), through the driver the daemon uses on this Node, each request.
  const read = await recordReader(process.env.DB);
  const expected = Buffer.from(`Bearer ${process.env.TOKEN}`);
  const app = new Hono();
  app.get('/api/headless/:taskId', async (c) => {
    const given = Buffer.from(c.req.header('authorization') ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return c.json({ code: 'unauthorized' }, 401);
    const record = await read(c.req.param('taskId'));
    return record === undefined ? c.json({ code: 'run_not_found' }, 404) : c.json(JSON.parse(record));
  });
  serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => announce(info.port));
} else if (process.env.MODE === 'hono') {
  const app = new Hono();
  app.get('/api/headless/:taskId', (c) => c.body(body, 200, headers));
  serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => announce(info.port));
} else {
  const server =
    process.env.MODE === 'whatwg-node'
      ? createServer(createServerAdapter(() => new Response(body, { headers })))
      : createServer((_req, res) => {
          res.writeHead(200, headers);
          res.end(body);
        });
  server.listen(0, '127.0.0.1', () => announce(server.address().port));
}
process.on('SIGTERM', () => process.exit(0));

/** A run's stored record by id: node:sqlite where Node has it, else its drop-in (as the daemon). */
async function recordReader(file) {
  const { DatabaseSync } = process.getBuiltinModule('node:sqlite') ?? (await import('@photostructure/sqlite'));
  const db = new DatabaseSync(file);
  // Closed at exit, which also holds it: a statement alone does not keep the connection from being
  // collected, and closed, under load (seen with the Node 20 drop-in).
  process.on('exit', () => db.close());
  const statement = db.prepare('SELECT record FROM headless_run WHERE id = ?');
  return async (id) => statement.get(id)?.record;
}
