// The handler under Deno. Run: deno run -A examples/deno-server.ts  (after `npm install`)
import { createHeadlessHandler } from 'headless-run-webhook';
import { serveDeno } from 'headless-run-webhook/deno';

const handler = createHeadlessHandler({ workspaces: [{ id: 'default', path: Deno.cwd() }] });
await handler.ready;
serveDeno(handler, {
  port: Number(Deno.env.get('PORT') ?? 47331),
  onListen: ({ hostname, port }) => console.log(`listening on http://${hostname}:${port}`),
});
