/** Reading the event stream of a run as a client does. */

export interface SseFrame {
  id?: string;
  event?: string;
  data?: string;
  /** A comment line (keep-alive). */
  comment?: string;
}

/** Parses complete SSE frames out of `text`; returns them and what is left of an incomplete one. */
export function parseSse(text: string): { frames: SseFrame[]; rest: string } {
  const parts = text.split('\n\n');
  const rest = parts.pop()!;
  const frames = parts.map((part) => {
    const frame: SseFrame = {};
    for (const line of part.split('\n')) {
      if (line.startsWith(':')) frame.comment = line.slice(1).trim();
      else {
        const colon = line.indexOf(':');
        const field = line.slice(0, colon) as keyof SseFrame;
        frame[field] = line.slice(colon + 1).replace(/^ /, '');
      }
    }
    return frame;
  });
  return { frames, rest };
}

/** Reads a streamed body to its end (bounded by `timeoutMs`), calling `onText` with each chunk. */
export async function readToEnd(
  source: Response | ReadableStreamDefaultReader<Uint8Array>,
  timeoutMs = 10_000,
  onText?: (text: string) => void,
): Promise<string> {
  // Responses come from whatwg-node as well as from the global fetch: tell them by shape.
  const reader = 'read' in source ? source : source.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const timer = setTimeout(() => void reader.cancel(), timeoutMs);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const chunk = decoder.decode(value, { stream: true });
      text += chunk;
      onText?.(chunk);
    }
  } finally {
    clearTimeout(timer);
  }
  return text;
}

/** The events (parsed `data`) of an SSE text. */
export const sseEvents = (text: string) =>
  parseSse(text)
    .frames.filter((f) => f.data !== undefined)
    .map((f) => ({ ...f, parsed: JSON.parse(f.data!) as { seq: number; type: string; time: string; data: Record<string, unknown> } }));
