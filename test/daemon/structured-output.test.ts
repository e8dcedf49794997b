import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Daemon, api, cleanupDaemons, startDaemon, tempDir, waitRun, writeConfig } from '../helpers/daemon';

/** docs/structured-output.md: an agent answers with `headless-inbox result`, through the built daemon. */
const dirs: string[] = [];
afterAll(() => cleanupDaemons(dirs));
const schema = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'], additionalProperties: false };

let daemon: Daemon;
const start = async (body: Record<string, unknown>) => (await (await api(daemon, 'POST', '/api/workspaces/ws/headless', body)).json()) as Record<string, any>;
const ended = (taskId: string) => waitRun(daemon, taskId) as Promise<Record<string, any>>;
const stdout = async (taskId: string) => ((await (await api(daemon, 'GET', `/api/headless/${taskId}/output`)).json()) as { stdout: string }).stdout;

describe('headless-inbox result', () => {
  beforeAll(async () => {
    const dir = tempDir();
    dirs.push(dir);
    writeConfig(dir, {
      schedules: [
        {
          name: 'answers',
          cron: '0 0 1 1 *',
          workspace: 'ws',
          prompt: `sh headless-inbox result '{"answer":"from a schedule"}'; sleep 600000;`,
          run: { agent: 'fake', outputSchema: schema },
        },
      ],
    });
    daemon = await startDaemon(dir);
  });

  it('an answer that does not match is refused, saying why; the first that matches ends the run with it as its result', async () => {
    const prompt = `sh headless-inbox result '{"answer":1}'; sh headless-inbox result '{"answer":"ok"}'; sleep 600000;`;
    const { taskId } = await start({ prompt, outputSchema: schema });
    const record = await ended(taskId);
    expect(record).toMatchObject({ status: 'succeeded', result: { answer: 'ok' } });
    expect(record).not.toHaveProperty('outputSchema');
    const out = await stdout(taskId);
    expect(out).toContain(
      'answer refused (HTTP 422) output_invalid: The answer does not match: its answer does not match outputSchema: /answer must be string',
    );
  });

  it("only the run itself (or a caller) may answer for it: another run's token is refused", async () => {
    const waiting = await start({ prompt: 'sleep 600000;', outputSchema: schema });
    const other = await start({ prompt: `sh HEADLESS_TASK_ID=${waiting.taskId} headless-inbox result '{"answer":"forged"}'` });
    await ended(other.taskId);
    expect(await stdout(other.taskId)).toContain('answer refused (HTTP 401) unauthorized');
    // A caller may.
    const res = await api(daemon, 'POST', `/api/headless/${waiting.taskId}/result`, { value: { answer: 'from the caller' } });
    expect(await res.json()).toEqual({ taskId: waiting.taskId, accepted: true });
    expect(await ended(waiting.taskId)).toMatchObject({ status: 'succeeded', result: { answer: 'from the caller' } });
  });

  it("a schedule's outputSchema: each of its runs has a result", async () => {
    const fired = (await (await api(daemon, 'POST', '/api/schedules/answers/run')).json()) as { taskId: string };
    expect(await ended(fired.taskId)).toMatchObject({ status: 'succeeded', result: { answer: 'from a schedule' } });
  });
});
