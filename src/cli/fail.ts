/** Ends a command with a message on stderr: exit 2 for bad usage or config, 1 for a failure. */
export function fail(message: string, code = 2): never {
  process.stderr.write(`headless-run-webhook: ${message}\n`);
  process.exit(code);
}
