#!/usr/bin/env node
// The GET baselines, each in a process of its own as the daemon is (in the load generator's
// process a server would share its thread and look slower than it is). BODY (env) is answered
// as JSON for any path: by node:http alone (MODE=bare), or through @whatwg-node/server with a
// handler that only returns it (MODE=whatwg-node), the layer the handler is built on.
import { createServer } from 'node:http';
import { Response, createServerAdapter } from '@whatwg-node/server';

const body = process.env.BODY ?? '{}';
const headers = { 'content-type': 'application/json' };
const server =
  process.env.MODE === 'whatwg-node'
    ? createServer(createServerAdapter(() => new Response(body, { headers })))
    : createServer((_req, res) => {
        res.writeHead(200, headers);
        res.end(body);
      });
server.listen(0, '127.0.0.1', () => process.stdout.write(`listening on http://127.0.0.1:${server.address().port}\n`));
process.on('SIGTERM', () => process.exit(0));
