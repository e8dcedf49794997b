import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { tempDir } from './daemon';

/** Whether this machine lets the tests mount a tmpfs (as root, outside a locked-down container). */
export function canMountTmpfs(): boolean {
  const d = tempDir();
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', d], { stdio: 'ignore' });
    execFileSync('umount', [d], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
}
