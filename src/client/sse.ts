/**
 * The `data` of each event of a Server-Sent Events body. An abort of `signal` ends it at once,
 * even where the body does not follow the request's signal (an in-process fetch, as MCP's).
 */
export async function* sseData(body: ReadableStream<Uint8Array>, signal?: AbortSignal): AsyncIterable<string> {
  const reader = body.getReader();
  // A cancel does not always settle a read already waiting (an in-process stream's next chunk may
  // be a heartbeat 15 s away): each read also ends at the abort.
  let ended: () => void = () => undefined;
  const aborted = new Promise<{ done: true; value: undefined }>((resolve) => {
    ended = () => resolve({ done: true, value: undefined });
  });
  const stop = () => {
    ended();
    void reader.cancel().catch(() => undefined);
  };
  if (signal?.aborted) stop();
  signal?.addEventListener('abort', stop, { once: true });
  const decoder = new TextDecoder();
  let buffer = '';
  let data: string[] = [];
  try {
    for (;;) {
      const { done, value } = await Promise.race([reader.read(), aborted]);
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      for (let nl = buffer.indexOf('\n'); nl !== -1; nl = buffer.indexOf('\n')) {
        const line = buffer.slice(0, nl).replace(/\r$/, '');
        buffer = buffer.slice(nl + 1);
        if (line === '') {
          if (data.length > 0) yield data.join('\n');
          data = [];
        } else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      }
    }
  } finally {
    signal?.removeEventListener('abort', stop);
    try {
      reader.releaseLock();
    } catch {
      // A read still waits on a stream that did not settle it: the cancel ends it.
    }
  }
}
