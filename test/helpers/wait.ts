/** Bounded waiting for tests: every loop here ends, with an error or `false`, by its deadline. */

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export interface WaitOptions {
  /** Long, so a busy machine only makes a failing check fail later, never a passing one fail. @default 120000 */
  timeoutMs?: number;
  /** @default 50 */
  intervalMs?: number;
}

/** Polls `check` until it holds; resolves false if it still does not by the deadline. */
export async function eventually(check: () => boolean | Promise<boolean>, o: WaitOptions = {}): Promise<boolean> {
  const deadline = Date.now() + (o.timeoutMs ?? 120_000);
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await sleep(o.intervalMs ?? 50);
  }
}

/** Polls `check` until it holds; throws, naming `what`, if it still does not by the deadline. */
export async function waitFor(check: () => boolean | Promise<boolean>, o: WaitOptions & { what?: string } = {}): Promise<void> {
  if (!(await eventually(check, o))) throw new Error(`timed out after ${o.timeoutMs ?? 120_000} ms waiting for ${o.what ?? 'a condition'}`);
}

/** Polls a run record until its status is no longer `running`, and returns it. */
export async function waitEnded<R extends { status?: unknown }>(read: () => Promise<R>, timeoutMs = 60_000): Promise<R> {
  let record: R | undefined;
  await waitFor(
    async () => {
      record = await read();
      return record.status !== 'running' && record.status !== 'queued';
    },
    { timeoutMs, intervalMs: 25, what: 'the run to end' },
  );
  return record!;
}
