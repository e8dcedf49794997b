import { execFile } from 'node:child_process';
import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';
import { SpawnFailure } from '../process/spawner';
import type { AgentAdapter } from './types';

/** The checks made before an agent is chosen or started: found, really that agent, credentials. */

/** The file `command` resolves to, on `PATH` when it is a bare name; undefined if none is executable. */
export function findExecutable(command: string, path: string | undefined): string | undefined {
  const isFile = (file: string) => {
    try {
      accessSync(file, constants.X_OK);
      return statSync(file).isFile();
    } catch {
      return false;
    }
  };
  if (command.includes('/')) return isAbsolute(command) && isFile(command) ? command : undefined;
  for (const dir of (path ?? '').split(delimiter)) {
    if (dir && isFile(join(dir, command))) return join(dir, command);
  }
  return undefined;
}

/** A probe's time limits, tried in turn while it times out: a busy machine gets a second, longer chance. */
const PROBE_LIMITS_MS = [10_000, 60_000];
/** Probe results by executable path and modification time: an upgrade is probed again. */
const probes = new Map<string, Promise<Probe>>();

/** What a probe printed, and whether it was cut off by its last time limit (then it says nothing). */
export interface Probe {
  output: string;
  timedOut: boolean;
}

/**
 * What `file args...` prints (stdout and stderr), with stdin closed and a time limit (retried
 * once with a longer one when it runs out); cached. It sees only `PATH` and `HOME` from `env`:
 * never a secret of the service.
 */
export function probe(file: string, args: string[], env: Record<string, string | undefined>, limits: readonly number[] = PROBE_LIMITS_MS): Promise<Probe> {
  let mtime = 0;
  try {
    mtime = statSync(file).mtimeMs;
  } catch {
    // Gone: the probe fails below.
  }
  const key = `${file}\0${mtime}\0${args.join('\0')}`;
  let running = probes.get(key);
  if (!running) {
    running = (async () => {
      let last: Probe & { remember: boolean } = { output: '', timedOut: false, remember: false };
      for (const limit of limits) {
        last = await probeOnce(file, args, env, limit);
        if (!last.timedOut) break;
      }
      // A probe that was killed or could not start says nothing about the program: it is not remembered.
      if (!last.remember) probes.delete(key);
      return { output: last.output, timedOut: last.timedOut };
    })();
    probes.set(key, running);
  }
  return running;
}

function probeOnce(file: string, args: string[], env: Record<string, string | undefined>, timeout: number): Promise<Probe & { remember: boolean }> {
  return new Promise((resolve) => {
    const child = execFile(file, args, { env: probeEnv(env), timeout, killSignal: 'SIGKILL', maxBuffer: 1024 * 1024 }, (error, stdout, stderr) => {
      const killed = error !== null && typeof error.code !== 'number';
      resolve({ output: `${stdout}${stderr}`, timedOut: killed && (error as { killed?: boolean }).killed === true, remember: !killed });
    });
    child.stdin?.end();
  });
}

/** What `file args...` prints; empty when it could not tell. */
export async function probeOutput(file: string, args: string[], env: Record<string, string | undefined>): Promise<string> {
  return (await probe(file, args, env)).output;
}

/** Whether the executable is the agent the adapter drives (adapters without an identity: yes). */
export async function isTheAgent(adapter: AgentAdapter, file: string, env: Record<string, string | undefined>): Promise<boolean> {
  if (!adapter.identity) return true;
  return adapter.identity.pattern.test(await probeOutput(file, adapter.identity.args, env));
}

/** `PATH` and `HOME` from the layers, a later layer winning: all a probe or a lookup needs. */
export function probeEnv(...layers: Array<Record<string, string | undefined> | undefined>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of ['PATH', 'HOME']) {
    const value = layers.reduce<string | undefined>((found, layer) => layer?.[name] ?? found, undefined);
    if (value !== undefined) env[name] = value;
  }
  return env;
}

/** How a credential file is named to people: `~/x` for one under HOME, `$VAR/x` as written. */
const credentialFileName = (file: string) => (file.startsWith('$') ? file : `~/${file}`);

/** Every source the adapter can take credentials from, as people name them. */
export function credentialSources(adapter: AgentAdapter): string[] {
  return [...(adapter.credentials?.env ?? []), ...(adapter.credentials?.files ?? []).map(credentialFileName)];
}

/** Where a credential file is, or undefined when the variable it lives under is unset. */
function credentialFilePath(file: string, env: Record<string, string | undefined>): string | undefined {
  const [, variable, rest] = /^\$([A-Z_]+)\/(.+)$/.exec(file) ?? [];
  const dir = variable === undefined ? env.HOME : env[variable];
  return dir ? join(dir, rest ?? file) : undefined;
}

/** Names of the credential sources the adapter knows that are present in `env` (and its HOME). */
export function presentCredentials(adapter: AgentAdapter, env: Record<string, string | undefined>): string[] {
  const credentials = adapter.credentials;
  if (!credentials) return [];
  const fileExists = (file: string) => {
    const path = credentialFilePath(file, env);
    return path !== undefined && existsSync(path);
  };
  return [...credentials.env.filter((name) => (env[name] ?? '') !== ''), ...(credentials.files ?? []).filter(fileExists).map(credentialFileName)];
}

/**
 * Refuses to start an agent that cannot run: its executable is another program of the same
 * name, or it needs credentials to run headless and has none. An executable this host cannot
 * find is left to the spawner, which may run it elsewhere (a sandbox).
 */
export async function preflight(adapter: AgentAdapter, command: string, env: Record<string, string>): Promise<void> {
  const file = findExecutable(command, env.PATH);
  if (file && !(await isTheAgent(adapter, file, env))) {
    throw new SpawnFailure(`cannot start ${adapter.name}: ${file} is not the ${adapter.name} agent CLI (another program of the same name?)`);
  }
  const credentials = adapter.credentials;
  if (credentials?.required && presentCredentials(adapter, env).length === 0) {
    const sources = credentialSources(adapter).join(' or ');
    throw new SpawnFailure(`cannot start ${adapter.name}: it has no credentials, and without any it never ends by itself; set ${sources}`);
  }
}

/**
 * Why an agent cannot run under a policy: read-only needs its own read-only mode, or a sandbox
 * (which mounts the workspace read-only); `ask` needs an agent that asks (its protocol carries its questions).
 */
export function policyRefusal(
  agent: { name: string; readOnly?: boolean; protocol?: { asks: boolean }; asking?: { asks: boolean } },
  policy: { permissions?: 'full' | 'read-only' | 'ask'; sandbox?: boolean } | undefined,
): string | undefined {
  if (policy?.permissions === 'ask' && !(agent.asking?.asks || agent.protocol?.asks)) {
    return `${agent.name} cannot ask for permissions (this workspace's permissions are "ask"): pick one that asks, such as claude or gemini-acp (docs/approvals.md)`;
  }
  if (policy?.permissions !== 'read-only' || agent.readOnly || policy.sandbox) return undefined;
  return `${agent.name} has no read-only mode of its own, and this workspace is read-only without a sandbox: set "sandbox": true, or pick another agent`;
}
