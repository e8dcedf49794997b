import { type ResultPromise, execa } from 'execa';
import { LineSplitter, TailBuffer } from './collectors';
import { AgentPriority } from './priority';
import { processStartTime, signalGroup } from './process-tree';

export interface SpawnOptions {
  /** Executable name (looked up on `env.PATH`) or path. Never run through a shell. */
  command: string;
  args: string[];
  cwd: string;
  /** The complete environment: nothing else is inherited. */
  env: Record<string, string>;
  /** Written to the child's stdin, which is then closed (unless `keepStdin`). Absent: stdin is closed from the start. */
  stdin?: string;
  /** Keep stdin open: the agent's protocol talks with it (`SpawnedProcess.write`) until it ends. */
  keepStdin?: boolean;
  /** Called with each stdout line, for the agent's output parser. */
  onStdoutLine?: (line: string) => void;
}

export interface ProcessExit extends ProcessOutput {
  exitCode: number | null;
  signal: string | null;
}

export interface SpawnedProcess {
  pid: number;
  /** From /proc, so crash recovery never signals a reused pid. */
  startTime?: string;
  /** Settles once the process has exited and its output is drained (at most `drainMs` more). */
  exit: Promise<ProcessExit>;
  /** Signals everything the process started: its whole process group. Called again after exit. */
  kill(signal: NodeJS.Signals): void;
  /** The output kept so far, while it runs (`GET /api/headless/:taskId/output`). Optional for a custom spawner. */
  output?(): ProcessOutput;
  /** Writes to its stdin, when spawned with `keepStdin` (a custom spawner without it cannot run a protocol that talks back). */
  write?(data: string): void;
  /** Closes its stdin, when spawned with `keepStdin`. */
  end?(): void;
}

export interface ProcessOutput {
  stdout: string;
  stderr: string;
  /** Whether more was printed than is kept. */
  truncated: boolean;
}

/**
 * Starts a process or rejects with `SpawnFailure`. Replaceable through the handler's `spawner`
 * option. The service does the rest whatever the spawner: the watchdog and cancel call `kill`,
 * and after `exit` settles it calls `kill('SIGKILL')` and kills every process still carrying
 * the run's `HEADLESS_TASK_ID`, so escaped descendants are reaped with a custom spawner too.
 */
export type Spawner = (options: SpawnOptions) => Promise<SpawnedProcess>;

export class SpawnFailure extends Error {
  /** The run's error code. */
  constructor(
    message: string,
    readonly code = 'spawn_failed',
  ) {
    super(message);
    this.name = 'SpawnFailure';
  }
}

export interface ExecaSpawnerOptions {
  /** Bytes of each stream kept for the sync answer. @default 65536 */
  tailBytes?: number;
  /** How long output is still read after the process exits. @default 2000 */
  drainMs?: number;
  /** Longest stdout line handed to the parser; longer lines are skipped. @default 4 MiB */
  maxLineBytes?: number;
  /**
   * Agents run lower the more of them run, so that together they weigh about what the service
   * does and cannot starve it of the CPU it relays them with (priority.ts); false runs each at
   * the service's own priority. @default true
   */
  lowerPriority?: boolean;
}

/**
 * The default spawner (execa): argv only, own process group (detached), stdin closed or fed
 * then closed, environment given whole. `exit` settles when the process exits and its output
 * is drained, for at most `drainMs` more: a grandchild holding the pipe cannot keep the run
 * open (the service then kills it with the group).
 */
export function createExecaSpawner(options: ExecaSpawnerOptions = {}): Spawner {
  const limits = { tailBytes: options.tailBytes ?? 64 * 1024, drainMs: options.drainMs ?? 2000, maxLineBytes: options.maxLineBytes ?? 4 * 1024 * 1024 };
  const priority = options.lowerPriority === false ? undefined : new AgentPriority();
  return (spawn) =>
    new Promise<SpawnedProcess>((resolve, reject) => {
      const child = execa(spawn.command, spawn.args, {
        cwd: spawn.cwd,
        env: spawn.env,
        extendEnv: false,
        detached: true,
        cleanup: false,
        stdin: spawn.stdin === undefined && !spawn.keepStdin ? 'ignore' : 'pipe',
        ...(spawn.stdin === undefined || spawn.keepStdin ? {} : { input: spawn.stdin }),
        stdout: 'pipe',
        stderr: 'pipe',
        buffer: false,
        reject: false,
        encoding: 'buffer',
        stripFinalNewline: false,
        windowsHide: true,
      });
      // At once, not at 'spawn': the fewer threads it has started yet, the fewer keep the old priority.
      const pid = child.pid;
      if (priority && pid !== undefined) {
        priority.started(pid);
        child.once('exit', () => priority.ended(pid));
      }
      let spawned = false;
      child.then(
        (result) => {
          if (!spawned) reject(new SpawnFailure(`cannot start ${spawn.command}: ${(result as { code?: string }).code ?? 'spawn_error'}`));
        },
        () => undefined,
      );
      child.once('spawn', () => {
        spawned = true;
        try {
          resolve(attach(child, spawn, limits));
        } catch (error) {
          reject(error);
        }
      });
    });
}

/** The started child as a SpawnedProcess: its output collected, its exit settled once drained (at most `drainMs` after it). */
function attach(child: ResultPromise, spawn: SpawnOptions, limits: Required<Omit<ExecaSpawnerOptions, 'lowerPriority'>>): SpawnedProcess {
  const { stdout: out, stderr: err, stdin } = child;
  const pid = child.pid;
  if (!out || !err || pid === undefined) throw new SpawnFailure(`cannot start ${spawn.command}: no pid or pipes`);
  const stdout = new TailBuffer(limits.tailBytes);
  const stderr = new TailBuffer(limits.tailBytes);
  const lines = spawn.onStdoutLine ? new LineSplitter(limits.maxLineBytes, spawn.onStdoutLine) : undefined;
  const streams = [out, err];
  out.on('data', (chunk: Buffer) => {
    stdout.push(chunk);
    lines?.push(chunk);
  });
  err.on('data', (chunk: Buffer) => stderr.push(chunk));
  for (const stream of streams) stream.on('error', () => undefined);
  stdin?.on('error', () => undefined);
  if (spawn.keepStdin && spawn.stdin !== undefined) stdin?.write(spawn.stdin);
  const ended = Promise.all(streams.map((s) => new Promise<void>((done) => (s.readableEnded || s.destroyed ? done() : s.once('close', done)))));
  const output = () => ({ stdout: stdout.text(), stderr: stderr.text(), truncated: stdout.truncated || stderr.truncated });
  const exit = new Promise<ProcessExit>((settle) => {
    child.once('exit', (code, signal) => {
      let timer: NodeJS.Timeout | undefined;
      const drained = new Promise<void>((done) => {
        timer = setTimeout(done, limits.drainMs);
      });
      void Promise.race([ended, drained]).then(() => {
        clearTimeout(timer);
        for (const stream of streams) stream.destroy();
        lines?.end();
        settle({ exitCode: code, signal, ...output() });
      });
    });
  });
  return {
    pid,
    startTime: processStartTime(pid),
    exit,
    kill: (signal) => signalGroup(pid, signal),
    output,
    ...(spawn.keepStdin ? { write: (data: string) => void stdin?.write(data), end: () => void stdin?.end() } : {}),
  };
}
