import type { HostedRun, ProcessHost } from '../process/process-host';
import type { ProcessExit, ProcessOutput, SpawnOptions, Spawner } from '../process/spawner';
import type { AgentEvent } from '../agents/types';
import type { Guard } from './guards';
import type { RunStop } from './outcome';

export interface SupervisorOptions {
  spawner: Spawner;
  /** The host of its processes (its placement's): what stops, reaps and measures them. */
  host: ProcessHost;
  /** The run it is, and its placement's data: what the host is told. */
  run: { taskId: string; data?: unknown };
  /** Its `env` must carry the run's marker, `HEADLESS_TASK_ID`. */
  spawn: SpawnOptions;
  /** What watches the run and may stop it (the watchdog is one). */
  guards: Guard[];
  /** Subscribes a guard to the events the agent's output meant. */
  onEvent?: (listener: (event: AgentEvent) => void) => void;
  /** Subscribes a guard to whether the run waits on a caller (a permission question). */
  onWaiting?: (listener: (waiting: boolean) => void) => void;
  /** Between SIGTERM and SIGKILL when a guard stops the run. */
  killGraceMs: number;
  /**
   * What its end kills: `run`, whatever is left of the run (its marker); `group`, its own process
   * group only: it ran beside the run's live agent, whose own end reaps what left the group.
   * @default "run"
   */
  leftovers?: 'run' | 'group';
}

export interface ProcessEnd extends ProcessExit {
  /** Set when the spawner lost track of the process instead of reporting its exit. */
  lost?: unknown;
}

export interface SupervisedProcess {
  pid: number;
  startTime?: string;
  /** The first stop, if any. */
  readonly stopped: RunStop | undefined;
  /** The output so far, if the spawner can tell. */
  output(): ProcessOutput | undefined;
  /** Writes to the agent's stdin, when it was kept open and the spawner can. */
  write?(data: string): void;
  /** Closes the agent's stdin, when it was kept open. */
  end?(): void;
  /**
   * Stops the run: SIGTERM to its group, SIGKILL after `graceMs` (at once with 0). Only the
   * first stop counts; returns false for any later one and once the process has ended.
   */
  stop(stop: RunStop, graceMs: number): boolean;
  /**
   * Settles once the process has exited and its output is drained, after whatever is left of
   * the run has been killed and reaped by its host (locally: its process group, and every
   * process carrying its marker, even one that left the group). Never rejects.
   */
  ended: Promise<ProcessEnd>;
}

/**
 * Starts a run's process and watches it: its guards, stops, and the reaping of leftovers
 * after exit, each asked of its host. Reaping is done here, not in the spawner, so a custom
 * spawner keeps it. Rejects as the spawner does when the process cannot be started.
 */
export async function superviseProcess(o: SupervisorOptions): Promise<SupervisedProcess> {
  const listeners: Array<(line: string) => void> = [];
  const onStdoutLine = (line: string) => {
    o.spawn.onStdoutLine?.(line);
    for (const listener of listeners) listener(line);
  };
  const child = await o.spawner({ ...o.spawn, onStdoutLine });
  const { host } = o;
  const run: HostedRun = {
    taskId: o.run.taskId,
    process: { pid: child.pid, startTime: child.startTime, machine: host.machine },
    ...(o.run.data === undefined ? {} : { data: o.run.data }),
  };
  // Never rejects: what a host could not signal is left to its reap, and the run ends as its process does.
  const kill = (signal: NodeJS.Signals) => host.kill(run, signal, child).catch(() => undefined);
  const timers: NodeJS.Timeout[] = [];
  let stopped: RunStop | undefined;
  let running = true;
  let unwatch: Array<() => void> = [];

  const reap = async () => {
    running = false;
    for (const end of unwatch) end();
    for (const timer of timers) clearTimeout(timer);
    await kill('SIGKILL');
    if (o.leftovers !== 'group') await host.reap(run).catch(() => undefined);
  };
  const ended = child.exit.then(
    async (exit): Promise<ProcessEnd> => {
      await reap();
      return exit;
    },
    async (lost: unknown): Promise<ProcessEnd> => {
      await reap();
      return { exitCode: null, signal: null, stdout: '', stderr: '', truncated: false, lost };
    },
  );

  const supervised: SupervisedProcess = {
    pid: child.pid,
    startTime: child.startTime,
    get stopped() {
      return stopped;
    },
    output: () => child.output?.(),
    ...(child.write ? { write: (data: string) => child.write?.(data) } : {}),
    ...(child.end ? { end: () => child.end?.() } : {}),
    stop(stop, graceMs) {
      if (stopped !== undefined || !running) return false;
      stopped = stop;
      void kill(graceMs === 0 ? 'SIGKILL' : 'SIGTERM');
      if (graceMs > 0) timers.push(setTimeout(() => void kill('SIGKILL'), graceMs));
      return true;
    },
    ended,
  };
  const context = {
    pid: child.pid,
    memory: () => host.memory(run),
    stop: (stop: RunStop) => void supervised.stop(stop, o.killGraceMs),
    onLine: (listener: (line: string) => void) => void listeners.push(listener),
    onEvent: (listener: (event: AgentEvent) => void) => o.onEvent?.(listener),
    onWaiting: (listener: (waiting: boolean) => void) => o.onWaiting?.(listener),
  };
  unwatch = o.guards.map((guard) => guard(context));
  return supervised;
}
