/**
 * The Node.js versions a test can run a program under: this one, and those `npm test` installed
 * from the registry (scripts/node-versions.mjs), named in HEADLESS_TEST_NODES.
 */
export function testNodes(): Array<[version: string, binary: string]> {
  const installed = JSON.parse(process.env.HEADLESS_TEST_NODES ?? '{}') as Record<string, string>;
  return [[process.versions.node, process.execPath], ...Object.entries(installed).filter(([version]) => version !== process.versions.node)];
}

/** Whether Node `version` has `node:sqlite` without a flag (22.13 and later). */
export function builtInSqlite(version: string): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return major > 22 || (major === 22 && minor >= 13);
}
