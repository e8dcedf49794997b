import { HttpProblem } from '../../contract/problems';

/** The largest request body read: a declared or received body past it is answered 413 at once. */
export const MAX_BODY_BYTES = 256 * 1024;

/**
 * Requires `application/json` (only a `charset` parameter allowed). Anything else is 415: a
 * browser can send text/plain, form or multipart bodies cross-site without a preflight.
 */
function checkMediaType(request: Request): void {
  const type = request.headers.get('content-type');
  const [essence, ...params] = (type ?? '').split(';').map((part) => part.trim().toLowerCase());
  const paramsOk = params.every((p) => /^charset=("?)utf-8\1$/.test(p));
  if (essence !== 'application/json' || !paramsOk) {
    throw new HttpProblem('unsupported_media_type', 'Send the body as Content-Type: application/json.');
  }
}

function hasBody(request: Request): boolean {
  const length = request.headers.get('content-length');
  if (length !== null) return length.trim() !== '0';
  return request.headers.has('transfer-encoding') || request.body !== null;
}

/** A body's text, bounded in size only (a sender's delivery, verified on these exact bytes). */
export async function readLimited(request: Request): Promise<string> {
  const declared = request.headers.get('content-length');
  if (declared !== null && Number(declared) > MAX_BODY_BYTES) {
    throw new HttpProblem('body_too_large', `The body exceeds ${MAX_BODY_BYTES} bytes.`, { headers: { connection: 'close' } });
  }
  if (!request.body) return '';
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_BODY_BYTES) {
      void reader.cancel().catch(() => undefined);
      throw new HttpProblem('body_too_large', `The body exceeds ${MAX_BODY_BYTES} bytes.`, { headers: { connection: 'close' } });
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Reads a JSON body's text, checked for media type and size only (for MCP's JSON-RPC, which parses it itself). */
export async function readJsonText(request: Request): Promise<string> {
  checkMediaType(request);
  return readLimited(request);
}

/** Reads a JSON object body: media type, size, syntax and shape, in that order. */
export async function readJsonObject(request: Request): Promise<Record<string, unknown>> {
  checkMediaType(request);
  const text = await readLimited(request);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new HttpProblem('invalid_body', 'The body is not valid JSON.');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new HttpProblem('invalid_body', 'The body must be a JSON object.');
  }
  return value as Record<string, unknown>;
}

/**
 * For POST routes that take no body (cancel, retire, mark read): none is needed, but one that
 * is sent must still be JSON (so a cross-site form post is refused) and at most `{}`.
 */
export async function readEmptyBody(request: Request): Promise<void> {
  // A content type a page may send without a preflight (a form) is refused even with no body.
  if (request.headers.has('content-type')) checkMediaType(request);
  if (!hasBody(request)) return;
  const text = await readLimited(request);
  if (text.trim() === '') return;
  checkMediaType(request);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new HttpProblem('invalid_body', 'The body is not valid JSON.');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value) || Object.keys(value).length > 0) {
    throw new HttpProblem('invalid_body', 'This endpoint takes no body.');
  }
}
