import { existsSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InboxCommand } from '../../src/core/runs/inbox-command';

/** docs/http-api.md "The Inbox": the launcher's folder, runnable by a sandboxed run, leaks no run's output schema to another. */
const command = new InboxCommand();
afterAll(() => command.close());

describe('the headless-inbox folder', () => {
  it('is runnable by all; a run’s output schema sits in a subfolder no run may list, under a name no other can guess, gone when its run ends', () => {
    const folder = command.folder();
    expect(folder).toBeDefined();
    expect(statSync(folder as string).mode & 0o777).toBe(0o755);
    const file = command.schemaFile('run_abc', { type: 'object' });
    const other = command.schemaFile('run_def', { type: 'object' });
    expect(dirname(file)).toBe(dirname(other));
    expect(statSync(dirname(file)).mode & 0o777).toBe(0o711);
    expect(statSync(file).mode & 0o777).toBe(0o644);
    expect(file).toMatch(/run_abc-[0-9a-f]{32}\.json$/);
    command.dropSchema('run_abc');
    expect(existsSync(file)).toBe(false);
    expect(existsSync(other)).toBe(true);
  });
});
