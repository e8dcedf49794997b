import { spawnSync } from 'node:child_process';

/**
 * An unprivileged user made for the test (`hrw-escape`), to run the daemon as where the test
 * runs as root: the escape tiers run once as root and once as it.
 */
export function escapeUser(): { uid: number; gid: number } {
  const name = 'hrw-escape';
  if (spawnSync('id', ['-u', name]).status !== 0) {
    const made = spawnSync('useradd', ['--no-create-home', '--shell', '/bin/sh', name], { encoding: 'utf8' });
    if (made.status !== 0) throw new Error(`useradd ${name}: ${made.stderr}`);
  }
  const id = (flag: string) => Number(spawnSync('id', [flag, name], { encoding: 'utf8' }).stdout.trim());
  return { uid: id('-u'), gid: id('-g') };
}
