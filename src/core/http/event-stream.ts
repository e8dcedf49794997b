import { Readable } from 'node:stream';
import { Response } from '@whatwg-node/fetch';
import type { EventReader } from '../events/run-events';
import type { RunEvent } from '../../contract/events';

/** A run's timeline as a streamed HTTP answer: Server-Sent Events, or JSON lines. */

export type StreamFormat = 'sse' | 'ndjson';

const FORMATS: Record<StreamFormat, { type: string; event(e: RunEvent): string; heartbeat: string; opening: string }> = {
  sse: {
    type: 'text/event-stream; charset=utf-8',
    event: (e) => `id: ${e.seq}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`,
    heartbeat: ': keep-alive\n\n',
    // How long a reconnecting EventSource waits.
    opening: 'retry: 2000\n\n',
  },
  // An empty line keeps the connection alive; JSON-lines readers skip it.
  ndjson: { type: 'application/x-ndjson; charset=utf-8', event: (e) => `${JSON.stringify(e)}\n`, heartbeat: '\n', opening: '' },
};

/** Each event's bytes per format, made once however many readers follow the run. */
const encoded: Record<StreamFormat, WeakMap<RunEvent, Buffer>> = { sse: new WeakMap(), ndjson: new WeakMap() };

function bytesOf(format: StreamFormat, event: RunEvent): Buffer {
  let bytes = encoded[format].get(event);
  if (!bytes) {
    bytes = Buffer.from(FORMATS[format].event(event));
    encoded[format].set(event, bytes);
  }
  return bytes;
}

/** The last batch made per first event and format: readers in step read the same batches. */
const batches: Record<StreamFormat, WeakMap<RunEvent, { last: RunEvent; bytes: Buffer }>> = { sse: new WeakMap(), ndjson: new WeakMap() };

/** A batch's bytes, in one buffer (one write to the socket), made once for every reader in step. */
function bytesOfBatch(format: StreamFormat, events: RunEvent[]): Buffer {
  const [first] = events;
  const last = events.at(-1);
  if (!first || !last) return Buffer.alloc(0);
  if (first === last) return bytesOf(format, first);
  const made = batches[format].get(first);
  if (made?.last === last) return made.bytes;
  const bytes = Buffer.concat(events.map((e) => bytesOf(format, e)));
  batches[format].set(first, { last, bytes });
  return bytes;
}

/**
 * Streams a reader until its run has ended. It pulls: the next events are read only when the
 * client has taken the last ones, so a slow client costs one batch of memory and never slows
 * the run; a client that has fallen behind the retained window skips to the oldest kept event.
 */
export function eventStreamResponse(reader: EventReader, format: StreamFormat, heartbeatMs: number): Response {
  const f = FORMATS[format];
  let reading = false;
  // A Node stream: whatwg-node's Response carries it as it is, and the node adapter pipes it
  // straight to the socket, with no web-stream layer allocating on every read.
  const body = new Readable({
    read() {
      if (reading) return;
      reading = true;
      reader.next(heartbeatMs).then(
        ({ events, ended }) => {
          reading = false;
          if (events.length > 0) this.push(bytesOfBatch(format, events));
          else if (!ended) this.push(f.heartbeat);
          if (ended) this.push(null);
        },
        (error: unknown) => this.destroy(error instanceof Error ? error : new Error(String(error))),
      );
    },
    destroy(error, callback) {
      reader.close();
      callback(error);
    },
  });
  if (f.opening) body.push(f.opening);
  // Where Response is the runtime's own (Deno), it takes a web stream.
  const stream = Response === (globalThis.Response as unknown) ? Readable.toWeb(body) : body;
  return new Response(stream as never, {
    status: 200,
    headers: { 'content-type': f.type, 'cache-control': 'no-store', 'x-accel-buffering': 'no' },
  });
}
