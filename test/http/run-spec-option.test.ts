import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import * as v from 'valibot';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SILENT, fakeAgent } from '../helpers/harness';

/**
 * docs/internals.md, The run spec: a per-run option is one entry in `src/contract/run-spec.ts`
 * plus its use. A copy of the source gets a throwaway option in that one file, and nothing else;
 * the option then reaches the start body, a workspace's and a schedule's `run` in the config
 * file, the record, the OpenAPI document, MCP's `start_run` and the client's types.
 */

const ROOT = resolve(__dirname, '../..');
let copy: string;
let workspace: string;

beforeAll(() => {
  // Inside the package, so the copy resolves its dependencies from this node_modules.
  copy = mkdtempSync(join(ROOT, '.run-spec-option-'));
  workspace = mkdtempSync(join(tmpdir(), 'hrw-spec-'));
  cpSync(join(ROOT, 'src'), join(copy, 'src'), { recursive: true });
  cpSync(join(ROOT, 'package.json'), join(copy, 'package.json'));
  const file = join(copy, 'src/contract/run-spec.ts');
  const source = readFileSync(file, 'utf8');
  const anchor = 'export const RunSpecEntries = {\n';
  expect(source).toContain(anchor);
  writeFileSync(file, source.replace(anchor, `${anchor}  /** A throwaway option. */\n  throwaway: v.optional(v.string('invalid_body')),\n`));
});

afterAll(() => {
  rmSync(copy, { recursive: true, force: true });
  rmSync(workspace, { recursive: true, force: true });
});

/** The handler of the copied source, with one workspace whose run spec sets the option. */
async function copiedHost() {
  const { createHeadlessHandler } = await import(join(copy, 'src/core/index.ts'));
  const handler = createHeadlessHandler({
    workspaces: [{ id: 'ws', path: workspace, agents: ['fake'], run: { throwaway: 'from the workspace' } }],
    agents: { fake: fakeAgent },
    logger: SILENT,
  });
  await handler.ready;
  const request = async (method: string, path: string, json?: unknown, headers: Record<string, string> = {}) => {
    const init = { method, headers: { host: 'localhost:47331', 'content-type': 'application/json', ...headers }, body: json && JSON.stringify(json) };
    return handler.fetch(`http://localhost:47331${path}`, init, { remoteAddress: '127.0.0.1', localAddress: '127.0.0.1' }) as Promise<Response>;
  };
  return { handler, request };
}

describe('a throwaway option added to the run spec alone', () => {
  it('reaches the record, from a start and from its workspace’s run spec', async () => {
    const { handler, request } = await copiedHost();
    try {
      const own = await request('POST', '/api/workspaces/ws/headless', { prompt: 'echo hi', agent: 'fake', throwaway: 'from the start', wait: true });
      expect(own.status).toBe(200);
      expect(((await own.json()) as { spec: Record<string, unknown> }).spec).toMatchObject({ throwaway: 'from the start' });
      const inherited = await request('POST', '/api/workspaces/ws/headless', { prompt: 'echo hi', agent: 'fake', wait: true });
      expect(((await inherited.json()) as { spec: Record<string, unknown> }).spec).toMatchObject({ throwaway: 'from the workspace' });
      // The real source has no such field: its start body refuses it.
      const bad = await request('POST', '/api/workspaces/ws/headless', { prompt: 'echo hi', throwaway: 5 });
      expect(await bad.json()).toMatchObject({ status: 400, code: 'invalid_body' });
    } finally {
      await handler.close();
    }
  });

  it('is in the OpenAPI document (the start body and the record) and MCP’s start_run', async () => {
    const { handler, request } = await copiedHost();
    try {
      const doc = (await (await request('GET', '/openapi.json')).json()) as Record<string, any>;
      const start = doc.paths['/api/workspaces/{workspaceId}/headless'].post.requestBody.content['application/json'].schema;
      expect(start.properties.throwaway).toEqual({ type: 'string' });
      expect(doc.components.schemas.RunRecord.properties.spec.properties.throwaway).toEqual({ type: 'string' });
      const listed = await request(
        'POST',
        '/mcp',
        { jsonrpc: '2.0', id: 1, method: 'tools/list' },
        { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
      );
      const tools = ((await listed.json()) as { result: { tools: Array<{ name: string; inputSchema: Record<string, any> }> } }).result.tools;
      expect(tools.find((t) => t.name === 'start_run')?.inputSchema.properties.throwaway).toEqual({ type: 'string' });
    } finally {
      await handler.close();
    }
  });

  it("is a key of a workspace's, a schedule's and a trigger's run in the config file", async () => {
    const { ConfigSchema } = await import(join(copy, 'src/cli/config.ts'));
    const run = { throwaway: 'x' };
    const config = {
      workspaces: [{ id: 'ws', path: '.', run }],
      schedules: [{ name: 'n', cron: '0 3 * * *', workspace: 'ws', prompt: 'p', run }],
      triggers: [{ name: 't', workspace: 'ws', sender: 'github', secret: 's', prompt: 'p', run }],
    };
    expect(v.safeParse(ConfigSchema, config).issues).toBeUndefined();
    const { ConfigSchema: Today } = await import('../../src/cli/config');
    expect(v.safeParse(Today, config).success).toBe(false);
  });

  it("is a field of the client's start options: the same call type-checks against the copy, not against the source", () => {
    const call = (src: string) => `import { createClient } from '${src}/client/index';
const client = createClient({ url: 'http://127.0.0.1:1' });
export const started = client.start('ws', { prompt: 'x', throwaway: 'y' });
`;
    const check = (dir: string, src: string) => {
      writeFileSync(join(dir, 'call.ts'), call(src));
      const tsconfig = { extends: join(ROOT, 'tsconfig.json'), compilerOptions: { noUnusedLocals: false }, include: [join(dir, 'call.ts')] };
      writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(tsconfig));
      return spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(dir, 'tsconfig.json')], { encoding: 'utf8' });
    };
    expect(check(copy, './src').stdout).toBe('');
    const outside = mkdtempSync(join(ROOT, '.run-spec-option-'));
    try {
      const today = check(outside, join(ROOT, 'src'));
      expect(today.status).not.toBe(0);
      expect(today.stdout).toContain("'throwaway' does not exist");
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });
});
