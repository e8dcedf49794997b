// The drop-in daemon on node:http. Run: node examples/node-daemon.mjs  (after `npm install`)
import { createHeadlessHandler } from 'headless-run-webhook';
import { createNodeServer } from 'headless-run-webhook/node';

const handler = createHeadlessHandler({ workspaces: [{ id: 'default', path: process.cwd() }] });
await handler.ready;
const server = createNodeServer(handler);
server.listen(Number(process.env.PORT ?? 47331), '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${server.address().port}`));
process.on('SIGTERM', () => server.close());
