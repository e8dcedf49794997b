import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';

/** The machine a process runs on: a pid means something only there. */
export const MACHINE = (() => {
  let boot = '';
  try {
    boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    // Not Linux: the host name alone.
  }
  return `${hostname()}/${boot}`;
})();
