// The library's install footprint for `npm run bench` (docs/library.md#a-lean-install): each
// package packed from this clone and installed into an empty project, as a host would: the lean
// library (headless-run-webhook-core, the target) beside the full package (the daemon's parts).
import { spawnSync } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Packs `dir`, installs it into an empty project; its node_modules' size, packages and install time. */
function installed(dir, tempDir) {
  const project = tempDir();
  spawnSync('npm', ['pack', '--ignore-scripts', '--pack-destination', project], { cwd: dir, stdio: 'ignore' });
  const tarball = readdirSync(project).find((f) => f.endsWith('.tgz'));
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'host', version: '1.0.0', private: true }));
  const started = performance.now();
  spawnSync('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', `./${tarball}`], { cwd: project, stdio: 'ignore' });
  const seconds = (performance.now() - started) / 1000;
  const modules = join(project, 'node_modules');
  const mb = Number(spawnSync('du', ['-sk', modules], { encoding: 'utf8' }).stdout.split('\t')[0]) / 1024;
  const packages = spawnSync(
    'find',
    [modules, '-name', 'package.json', '-path', '*node_modules/*/package.json', '-not', '-path', '*/node_modules/*/node_modules/*/*'],
    {
      encoding: 'utf8',
    },
  )
    .stdout.split('\n')
    .filter((line) => /node_modules\/(@[^/]+\/)?[^/@]+\/package\.json$/.test(line)).length;
  const native = spawnSync('find', [modules, '-name', '*.node'], { encoding: 'utf8' }).stdout.trim() !== '';
  return { mb, packages, seconds, native };
}

export function installSize({ root, row, tempDir }) {
  const lean = installed(join(root, 'packages/core'), tempDir);
  const full = installed(root, tempDir);
  const said = (i) => `${i.mb.toFixed(1)} MB, ${i.packages} packages, ${i.seconds.toFixed(0)} s${i.native ? ', a native build' : ''}`;
  row(
    'library install, lean (headless-run-webhook-core, from npm pack into an empty project)',
    said(lean),
    `${said(full)} (the full package)`,
    `${(lean.mb / full.mb).toFixed(2)}× the size`,
    '≤ 25 MB, no native build',
    lean.mb <= 25 && !lean.native,
  );
}
