import { createServer } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createNodeServer, toNodeListener } from '../../src/adapters/node';
import type { HeadlessHandler } from '../../src/core/index';
import { closeAllHosts, createTestHost } from '../helpers/harness';

afterEach(closeAllHosts);

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

  it('a socket that never finishes its headers is closed by the server (slowloris)', async () => {
    const host = await createTestHost();
    const server = createNodeServer(host.handler);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
      await new Promise((r) => socket.once('connect', r));
      socket.write('GET /api/headless?wsId=ws HTTP/1.1\r\nHost: localhost\r\nX-Slow: ');
      // Read what comes (the 408), so the end of the connection is seen.
      socket.resume();
      const closed = new Promise<boolean>((r) => socket.once('close', () => r(true)));
      // Headers are due within 10 s; bounded well past that, so a busy machine cannot fail it.
      const timeout = new Promise<boolean>((r) => setTimeout(() => r(false), 25_000).unref());
      expect(await Promise.race([closed, timeout])).toBe(true);
      socket.destroy();
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  }, 600_000);
});
