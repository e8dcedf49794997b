// Built-ins by getBuiltinModule, as in data-dir.ts.
const { delimiter, dirname, join, resolve } = process.getBuiltinModule('node:path');

/**
 * `npx` puts the project's `node_modules/.bin` first on the PATH. In a clone of this package that
 * folder holds the agent CLIs its test suite runs (dev dependencies): they are not the user's
 * agents, so `doctor` must not report them and a run must not start them. Run by `npx`, the
 * daemon and `doctor` leave this package's own folder out; a host project's folder stays.
 * `entry` is the command line's file, in the package's `dist`.
 */
export function dropOwnDevTools(entry: string, env: NodeJS.ProcessEnv = process.env): void {
  if (env.npm_command !== 'exec') return;
  const own = join(dirname(dirname(entry)), 'node_modules', '.bin');
  env.PATH = (env.PATH ?? '')
    .split(delimiter)
    .filter((dir) => resolve(dir) !== own)
    .join(delimiter);
}
