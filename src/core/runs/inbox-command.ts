import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ownTempFolder } from '../process/own-temp';
import { builtFile } from '../util/package-file';

/**
 * Puts `headless-inbox` on every run's `PATH`, however the service was started: through npx,
 * as `node dist/cli.cjs serve`, from an absolute bin path under a service manager, or embedded in
 * a host app. A folder of its own (0755, new at each start, removed at close) holds one launcher
 * (and, in a subfolder no run may list, the output schemas codex reads)
 * that runs this package's `dist/inbox-cli.js` with this Node; one a killed service left is
 * removed by the next.
 */
export class InboxCommand {
  private dir: string | undefined;
  /** Looked for once: the package's built command (undefined where it is not built). */
  private cli: string | undefined | null = null;
  /** The schema files of runs not ended yet. */
  private readonly schemas = new Map<string, string[]>();

  /** The folder to put first on a run's PATH; undefined where the package's command is not built. */
  folder(): string | undefined {
    if (this.dir) return this.dir;
    if (this.cli === null) this.cli = builtFile('inbox-cli.js');
    const cli = this.cli;
    if (!cli) return undefined;
    this.dir = ownTempFolder(PREFIX);
    // Readable and runnable by all: a root daemon's sandboxed run is another user (docs/security.md),
    // and the folder holds nothing secret (the launcher and output schemas); only its owner writes.
    chmodSync(this.dir, 0o755);
    const quote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;
    const launcher = join(this.dir, 'headless-inbox');
    // Under Deno the same program needs its permissions: the run's variables, the service's URL, the file it pushes.
    const runner = UNDER_DENO ? `${quote(process.execPath)} run --quiet --allow-env --allow-net --allow-read` : quote(process.execPath);
    writeFileSync(launcher, `#!/bin/sh\nexec ${runner} ${quote(cli)} "$@"\n`, { mode: 0o755 });
    chmodSync(launcher, 0o755);
    return this.dir;
  }

  /**
   * A file holding a run's output schema, for a CLI that reads it from one (codex): under this
   * folder, which a sandboxed run can read (it is on its PATH), in a subfolder no run may list, by
   * a name no other run can guess; removed when its run ends (`dropSchema`).
   */
  schemaFile(taskId: string, schema: object): string {
    const folder = this.folder();
    // Not built (no launcher folder): a private folder of its own, removed with the file.
    const dir = folder ? join(folder, 'schemas') : mkdtempSync(join(tmpdir(), 'headless-schema-'));
    if (folder) {
      mkdirSync(dir, { recursive: true, mode: 0o711 });
      chmodSync(dir, 0o711);
    }
    const file = join(dir, `${taskId}-${randomBytes(16).toString('hex')}.json`);
    writeFileSync(file, JSON.stringify(schema), { mode: 0o644 });
    this.schemas.set(taskId, [...(this.schemas.get(taskId) ?? []), folder ? file : dir]);
    return file;
  }

  /** Its run has ended: its schema files go. */
  dropSchema(taskId: string): void {
    for (const path of this.schemas.get(taskId) ?? []) rmSync(path, { recursive: true, force: true });
    this.schemas.delete(taskId);
  }

  close(): void {
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
    this.dir = undefined;
  }
}

const PREFIX = 'headless-inbox-';
const UNDER_DENO = typeof (globalThis as { Deno?: unknown }).Deno !== 'undefined';
