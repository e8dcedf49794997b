// `npm run test:latest-clis`: the newest release of each agent CLI the test suite pins, against
// the real-CLI tier (test/daemon/real-agents*.test.ts), so a change in a CLI is seen before users
// see it. It needs the npm registry. It prints what changed and how each CLI fared; with --write
// it puts that table in docs/agents.md, between the latest-clis markers.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { ensureNodes } from './node-versions.mjs';

const ROOT = resolve(import.meta.dirname, '..');
const PACKAGES = {
  claude: '@anthropic-ai/claude-code',
  codex: '@openai/codex',
  gemini: '@google/gemini-cli',
  qwen: '@qwen-code/qwen-code',
  opencode: 'opencode-ai',
  copilot: '@github/copilot',
  goose: '@aaif/goose-binary-linux-x64',
  // pi's package since 1.0 (it was @mariozechner/pi-coding-agent).
  pi: '@earendil-works/pi-coding-agent',
  // The platform package holds the binary itself (docs/agents.md: cline).
  cline: '@cline/cli-linux-x64',
  // Its successor @ampcode/cli ships no working Linux x64 build yet (docs/agents.md).
  amp: '@sourcegraph/amp',
};
const pinned = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).devDependencies;
const npm = (args, cwd) => execFileSync('npm', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();

const dir = mkdtempSync(join(tmpdir(), 'hrw-latest-clis-'));
try {
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'latest-clis', private: true }));
  const latest = Object.fromEntries(Object.entries(PACKAGES).map(([cli, pkg]) => [cli, npm(['view', pkg, 'version'], dir)]));
  process.stdout.write(
    `installing ${Object.entries(latest)
      .map(([cli, v]) => `${cli} ${v}`)
      .join(', ')}…\n`,
  );
  npm(['install', '--no-audit', '--no-fund', ...Object.entries(PACKAGES).map(([cli, pkg]) => `${pkg}@${latest[cli]}`)], dir);

  const report = join(dir, 'report.json');
  // On the newest Node the suite installs, as `npm test` runs this tier: claude, qwen and pi need Node 22 or later.
  const node = Object.entries(ensureNodes(ROOT)).sort(([a], [b]) => b.localeCompare(a, undefined, { numeric: true }))[0]?.[1] ?? process.execPath;
  spawnSync(
    node,
    [
      join(ROOT, 'node_modules/vitest/vitest.mjs'),
      'run',
      'test/daemon/real-agents.test.ts',
      'test/daemon/real-agents-features.test.ts',
      '--reporter=json',
      `--outputFile=${report}`,
    ],
    {
      cwd: ROOT,
      env: { ...process.env, PATH: `${dirname(node)}:${process.env.PATH}`, HEADLESS_REAL_CLI_BIN: join(dir, 'node_modules/.bin') },
      stdio: 'inherit',
    },
  );
  const results = JSON.parse(readFileSync(report, 'utf8')).testResults.flatMap((file) => file.assertionResults);
  const rows = Object.keys(PACKAGES).map((cli) => {
    const mine = results.filter((r) => r.ancestorTitles[0]?.startsWith(`${cli} (the real CLI)`));
    const failed = mine.filter((r) => r.status === 'failed');
    const verdict =
      mine.length === 0
        ? 'not run'
        : failed.length === 0
          ? `${mine.length} passed`
          : `${failed.length} of ${mine.length} failed: ${failed.map((r) => r.title).join('; ')}`;
    const changed = latest[cli] === pinned[PACKAGES[cli]] ? 'same' : `newer (pinned ${pinned[PACKAGES[cli]]})`;
    return `| ${cli} | ${latest[cli]} | ${changed} | ${verdict} |`;
  });
  const table = [
    `Last run ${new Date().toISOString().slice(0, 10)}:`,
    '',
    '| CLI | newest | against the pinned one | real-CLI tier |',
    '|---|---|---|---|',
    ...rows,
  ].join('\n');
  process.stdout.write(`\n${table}\n`);
  if (process.argv.includes('--write')) {
    const file = join(ROOT, 'docs/agents.md');
    const doc = readFileSync(file, 'utf8');
    const marked = /<!-- latest-clis:start -->[\s\S]*<!-- latest-clis:end -->/;
    if (!marked.test(doc)) throw new Error('docs/agents.md has no latest-clis markers');
    writeFileSync(file, doc.replace(marked, `<!-- latest-clis:start -->\n${table}\n<!-- latest-clis:end -->`));
  }
  process.exitCode = rows.some((row) => row.includes('failed') || row.includes('not run')) ? 1 : 0;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
