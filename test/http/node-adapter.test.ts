import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { toNodeListener } from '../../src/adapters/node';
import type { HeadlessHandler } from '../../src/core/index';

describe('the node:http adapter', () => {
  it('an error it cannot answer is logged through the handler log, then answered 500', async () => {
    const logged: Array<[string, unknown]> = [];
    const boom = new Error('boom');
    // Stands in for a handler whose answer cannot be produced: only the adapter's own path is under test.
    const handler = {
      handleNodeRequestAndResponse: async () => {
        throw boom;
      },
      log: (message: string, error?: unknown) => logged.push([message, error]),
    } as unknown as HeadlessHandler;
    const server = createServer(toNodeListener(handler));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/api/headless`);
      expect(res.status).toBe(500);
      expect(logged).toEqual([['could not answer a request', boom]]);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
