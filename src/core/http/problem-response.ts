/** The one place that turns errors into responses. */

// whatwg-node's Response: on node:http its string bodies skip the web-stream machinery.
import { Response } from '@whatwg-node/fetch';
import { HttpProblem, Refusal, StorageError, problemAnswer } from '../../contract/problems';
import { MissingPackage } from '../util/optional-package';

export function problemResponse(problem: Refusal): Response {
  const { status, body, headers } = problemAnswer(problem);
  return new Response(JSON.stringify(body), { status, headers });
}

/**
 * Maps anything thrown while handling a request to a response. Unknown errors become a bare
 * 500 `internal`: their message may carry paths, tokens or stack frames, so it is only logged.
 */
export function errorToResponse(error: unknown, log: (message: string, error: unknown) => void): Response {
  if (error instanceof Refusal) return problemResponse(error);
  if (error instanceof MissingPackage) return problemResponse(new HttpProblem('not_installed', error.message));
  if (error instanceof StorageError) {
    log('storage failure', error);
    return problemResponse(new HttpProblem('storage_unavailable', 'The store refused the operation; retry later.'));
  }
  log('unexpected error', error);
  return problemResponse(new HttpProblem('internal', 'The request failed unexpectedly.'));
}
