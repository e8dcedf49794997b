// An Express gateway that embeds the handler behind its own API-key check.
// Run: GATEWAY_API_KEY=change-me node examples/express-gateway.mjs
import { createHash, timingSafeEqual } from 'node:crypto';
import express from 'express';
import { createHeadlessHandler } from 'headless-run-webhook';
import { toExpressMiddleware } from 'headless-run-webhook/express';

const digest = (value) => createHash('sha256').update(value).digest();
const expected = digest(process.env.GATEWAY_API_KEY ?? '');
if (!process.env.GATEWAY_API_KEY) throw new Error('set GATEWAY_API_KEY');

const handler = createHeadlessHandler({
  workspaces: [{ id: 'default', path: process.cwd() }],
  // The host's own auth replaces the default gate. Agents' Inbox pushes with their run token still work.
  authorize: (request) => timingSafeEqual(digest(request.headers.get('x-api-key') ?? ''), expected),
});
await handler.ready;

const app = express();
app.use('/agents', toExpressMiddleware(handler));
const server = app.listen(Number(process.env.PORT ?? 8080), '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${server.address().port}/agents`));
process.on('SIGTERM', () => server.close(() => handler.close()));
