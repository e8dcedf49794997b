import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A real webhook receiver on loopback: it records each request and answers as `answer` says. */

export interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** A status to answer with, or `hang` to never answer. */
export type Answer = number | 'hang';

export interface Receiver {
  url: string;
  received: Received[];
  /** How to answer the next request, given how many came before it. */
  answer: (index: number, request: Received) => Answer;
  close(): Promise<void>;
}

const receivers = new Set<Server>();

async function stop(server: Server): Promise<void> {
  receivers.delete(server);
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
}

export async function startReceiver(answer: Receiver['answer'] = () => 200): Promise<Receiver> {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers[k] = v;
      const request = { path: req.url ?? '/', headers, body: Buffer.concat(chunks).toString('utf8') };
      const verdict = receiver.answer(received.length, request);
      received.push(request);
      if (verdict === 'hang') return;
      res.writeHead(verdict, verdict >= 300 && verdict < 400 ? { location: `${receiver.url}/moved` } : {});
      res.end(verdict >= 400 ? 'receiver says no' : 'ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receivers.add(server);
  const receiver: Receiver = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    answer,
    close: () => stop(server),
  };
  return receiver;
}

export async function closeReceivers(): Promise<void> {
  await Promise.all([...receivers].map(stop));
}
