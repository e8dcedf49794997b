import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { transformSync } from 'esbuild';
import { delimiter, dirname, join, resolve } from 'node:path';
import * as v from 'valibot';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../src/cli/config';
import { CLI, type Daemon, cleanupDaemons, startDaemon, tempDir } from '../helpers/daemon';
import { type DocBlock, docBlocks, pageLinks, unmet } from '../helpers/doc-blocks';

/**
 * The examples of the README and of every page in docs/ are run, so they cannot rot
 * (docs/testing.md: Examples in the docs). Each page gets a fresh workspace and data directory,
 * and the daemon its own serve block starts (else `serve --demo`); `npx headless-run-webhook`
 * and `npx headless-inbox` run this build, as npx runs an installed package's command.
 */

const ROOT = resolve(__dirname, '../..');
const DOC_URL = 'http://127.0.0.1:47331';
const pages = [
  { file: join(ROOT, 'README.md'), page: 'README.md' },
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => ({ file: join(ROOT, 'docs', name), page: `docs/${name}` })),
];

const dirs: string[] = [];
afterAll(() => cleanupDaemons(dirs));

interface Stage {
  workspace: string;
  env: NodeJS.ProcessEnv;
  daemon?: Daemon;
}

function newStage(): Stage {
  const root = tempDir();
  dirs.push(root);
  const workspace = join(root, 'workspace');
  const bin = join(root, 'bin');
  mkdirSync(workspace);
  mkdirSync(bin);
  writeFileSync(join(workspace, 'README.md'), '# A project\n');
  writeFileSync(join(workspace, 'TODO.md'), '- fix the first item\n');
  spawnSync('git', ['init', '-q', workspace]);
  const npx = `#!/bin/sh\ncase "$1" in\n  headless-run-webhook) shift; exec "${process.execPath}" "${CLI}" "$@" ;;\n  headless-inbox) shift; exec "${process.execPath}" "${join(ROOT, 'dist/inbox-cli.js')}" "$@" ;;\n  *) echo "the docs test runs no npx package but this one: $1" >&2; exit 127 ;;\nesac\n`;
  writeFileSync(join(bin, 'npx'), npx);
  chmodSync(join(bin, 'npx'), 0o755);
  // The agent CLIs this repository installs for its tests are not on a reader's PATH.
  const path = [bin, ...(process.env.PATH ?? '').split(delimiter).filter((dir) => !dir.includes('node_modules'))].join(delimiter);
  const env = { ...process.env, PATH: path, HEADLESS_DATA_DIR: join(root, 'data'), HEADLESS_URL: '', HEADLESS_ADMIN_TOKEN: '', NO_COLOR: '1' };
  return { workspace, env };
}

async function serveFor(stage: Stage, block: DocBlock | undefined): Promise<Daemon> {
  const args = block?.serve
    ? block.serve
        .replace(/^npx headless-run-webhook serve\s*/, '')
        .split(/\s+/)
        .filter(Boolean)
    : ['--demo'];
  return startDaemon(stage.workspace, args, stage.env);
}

/**
 * A code example, as its reader would run it: TypeScript without its types, run by Node from a
 * folder inside this package, so `headless-run-webhook/...` resolves to this build.
 */
function runCode(stage: Stage, block: DocBlock): { code: number | null; output: string } {
  const dir = mkdtempSync(join(ROOT, '.docs-run-'));
  try {
    const source = block.script.split(DOC_URL).join(stage.daemon!.url);
    const file = join(dir, 'example.mjs');
    writeFileSync(file, transformSync(source, { loader: block.lang === 'ts' ? 'ts' : 'js', format: 'esm' }).code);
    const result = spawnSync(process.execPath, [file], { cwd: stage.workspace, env: stage.env, encoding: 'utf8', timeout: 90_000 });
    return { code: result.status, output: `${result.stdout}${result.stderr}`.split(stage.daemon!.url).join(DOC_URL) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function runBlock(stage: Stage, block: DocBlock): { code: number | null; output: string } {
  if (block.lang !== 'sh') return runCode(stage, block);
  // A page's blocks share their variables, as they would typed into one terminal.
  const vars = join(stage.workspace, '..', 'vars.sh');
  const prelude = `exec 2>&1\nset -aeo pipefail\n[ -f '${vars}' ] && . '${vars}'\ntrap "export -p > '${vars}'" EXIT\n`;
  const url = stage.daemon?.url ?? DOC_URL;
  const script = `${prelude}${block.script.split(DOC_URL).join(url)}`;
  const result = spawnSync('bash', ['-c', script], { cwd: stage.workspace, env: stage.env, encoding: 'utf8', timeout: 90_000 });
  return { code: result.status, output: result.stdout.split(url).join(DOC_URL) };
}

describe('links', () => {
  it('every relative link of the README and docs/ names a file that exists, and a heading it has', () => {
    const broken: string[] = [];
    for (const { file, page } of pages) {
      for (const link of pageLinks(file).links) {
        const [path, anchor] = link.split('#');
        const target = path ? resolve(dirname(file), path) : file;
        if (!existsSync(target)) broken.push(`${page}: ${link} (no such file)`);
        else if (anchor && target.endsWith('.md') && !pageLinks(target).anchors.has(anchor)) broken.push(`${page}: ${link} (no such heading)`);
      }
    }
    expect(broken).toEqual([]);
  });
});

for (const { file, page } of pages) {
  const blocks = docBlocks(file, page);
  if (blocks.length === 0) continue;
  describe.sequential(page, () => {
    const stage = newStage();
    afterAll(async () => {
      await stage.daemon?.stop();
    });
    for (const block of blocks) {
      const title = `${page}:${block.line}${block.notRun ? ` (not run: ${block.notRun})` : ''}`;
      if (block.lang === 'json') {
        it(`${title} (parses; a config file is a valid one)`, () => {
          const value = JSON.parse(block.script) as Record<string, unknown>;
          // A config file's example (what names workspaces, schedules or triggers) is one the daemon reads.
          if (['workspaces', 'schedules', 'triggers'].some((key) => key in value)) {
            const result = v.safeParse(ConfigSchema, value);
            expect(
              result.issues?.map((i) => `${v.getDotPath(i)}: ${i.message}`),
              block.script,
            ).toBeUndefined();
          }
        });
        continue;
      }
      if (block.notRun !== undefined) {
        it(title, () => expect(block.notRun, 'a block that is not run says why').toMatch(/\w{3,}/));
        continue;
      }
      it(title, async () => {
        if (block.serve) {
          expect(stage.daemon, 'one serve block per page, before the blocks that call it').toBeUndefined();
          stage.daemon = await serveFor(stage, block);
          const output = stage.daemon.output().split(stage.daemon.url).join(DOC_URL);
          expect(unmet(block.expected, output), output).toBeUndefined();
          return;
        }
        // A page that starts its own daemon may set it up first (write its config): those blocks run without one.
        if (!blocks.some((b) => b.serve && b.line > block.line)) stage.daemon ??= await serveFor(stage, undefined);
        const { code, output } = runBlock(stage, block);
        expect(code, output).toBe(block.exitCode);
        expect(unmet(block.expected, output), output).toBeUndefined();
      });
    }
  });
}
