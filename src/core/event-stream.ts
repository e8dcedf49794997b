import { ReadableStream, Response } from '@whatwg-node/fetch';
import type { EventReader, RunEvent } from './run-events';

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

/**
 * Streams a reader until its run has ended. It pulls: the next events are read only when the
 * client has taken the last ones, so a slow client costs one batch of memory and never slows
 * the run; a client that has fallen behind the retained window skips to the oldest kept event.
 */
export function eventStreamResponse(reader: EventReader, format: StreamFormat, heartbeatMs: number): Response {
  const f = FORMATS[format];
  const encoder = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      if (f.opening) controller.enqueue(encoder.encode(f.opening));
    },
    async pull(controller) {
      const { events, ended } = await reader.next(heartbeatMs);
      if (events.length > 0) controller.enqueue(Buffer.concat(events.map((e) => bytesOf(format, e))));
      else if (!ended) controller.enqueue(encoder.encode(f.heartbeat));
      if (ended) controller.close();
    },
    cancel() {
      reader.close();
    },
  });
  return new Response(body, {
    status: 200,
    headers: { 'content-type': f.type, 'cache-control': 'no-store', 'x-accel-buffering': 'no' },
  });
}
