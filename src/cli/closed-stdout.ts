/**
 * A reader that stops early (`headless-run-webhook inbox | head -1`) closes the pipe, and the next
 * write to standard output fails with EPIPE. A command then ends quietly with exit 0: its reader
 * had what it wanted, so no stack trace, and a `set -o pipefail` script does not fail. The daemon
 * (`serve`) goes on: only its first line is written there, and its reader going away is no reason
 * to stop its runs. Any other error on standard output is thrown as before.
 */
export function onClosedStdout(keepRunning: boolean): (error: NodeJS.ErrnoException) => void {
  return (error) => {
    if (error.code !== 'EPIPE') throw error;
    if (!keepRunning) process.exit(0);
  };
}
