import { closeInheritedDescriptors } from './inherited-descriptors';
import { rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Server } from 'node:http';
import { parseArgs } from 'node:util';
import type pino from 'pino';
import { createNodeServer } from '../adapters/node';
import { isLoopbackAddress } from '../core/http/auth';
import { type HeadlessHandler, type HeadlessHandlerOptions, createHeadlessHandler } from '../core/handler';
import type { HeadlessStore } from '../core/store/headless-store';
import { createPostgresStore, createSqliteStore } from '../core/store/sql-stores';
import { SERVICE_SECRETS } from '../core/runs/env';
import { type AdminToken, readAdminToken } from './admin-token';
import { startWarnings } from './start-warnings';
import { daemonTracing } from './tracing';
import { type DaemonConfig, loadConfig } from './config';
import { type DataDirClaim, openDataDir } from './data-dir';
import { openSocket } from './socket';
import { version } from '../../package.json';
import { LOG_LEVELS, type LogLevel, daemonLogger } from './logging';
import { demoAgent } from './demo/agent';
import { fail } from './fail';
import { inheritedEnv } from './run-env';
import { holdYoungGeneration, youngGenerationChosen } from './young-generation';

/** `headless-run-webhook serve`: the drop-in daemon (docs/configuration.md). */

export const SERVE_USAGE = `Usage: headless-run-webhook serve [--config FILE] [--port N] [--host H] [--data-dir DIR] [--store URL]
                                  [--admin-token-file FILE] [--socket PATH [--socket-mode MODE]]
                                  [--log-level LEVEL] [--demo]

  --config FILE    config file (default: ./headless.config.json if present)
  --port N         port (default 47331; when not given, the next 20 ports are tried)
  --host H         address to bind (default 127.0.0.1)
  --data-dir DIR   where runs, Sessions and the Inbox are stored (or HEADLESS_DATA_DIR;
                   default ~/.local/state/headless-run-webhook, outside every workspace)
  --store URL      store them in PostgreSQL instead: postgres://… (or HEADLESS_STORE_URL,
                   which keeps a password out of the process list); several daemons
                   may share one database
  --socket PATH    also serve on this Unix-domain socket: whoever its file mode lets
                   connect is a local caller (callers use --url unix:PATH)
  --socket-mode M  the socket file's mode, octal (default 600: this user only)
  --log-level L    debug, info (default), warn, error or silent; logs go to stderr, as
                   JSON lines unless stderr is a terminal
  --demo           add the demo agent (no model, no credentials: it lists the workspace
                   and pushes a report to the Inbox) and make it the default agent
  --labels L,M     this daemon's labels (gpu, mac…): in a fleet it runs the workspaces
                   whose labels it has, and queues the others' starts for members that do

  --admin-token-file FILE
                   the admin token (at least 32 characters; the file 0600), also
                   HEADLESS_ADMIN_TOKEN_FILE or systemd's credential headless-admin-token;
                   HEADLESS_ADMIN_TOKEN works too, but agents can read an environment`;

export const WORKER_USAGE = `Usage: headless-run-webhook worker --store URL [--labels L,M] [--config FILE] [--port N]
                                   [--data-dir DIR] [--log-level LEVEL]

  Joins a fleet (a PostgreSQL store several daemons share) to run the agents of the workspaces
  in its config whose labels it has, as they are queued by any member. It answers on loopback
  only (health, metrics, and its own runs' calls); callers use the fleet's API daemons.
  Takes serve's options, but --host (always 127.0.0.1) and --socket.`;

const DEFAULT_PORT = 47331;
const PORT_TRIES = 20;
/** V8 would double it to 32 MB under a burst of long-lived connections (docs/performance.md). */
const YOUNG_GENERATION_MB = 16;

function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((done, reject) => {
    const onError = (error: Error) => {
      server.off('listening', onListening);
      reject(error);
    };
    const onListening = () => {
      server.off('error', onError);
      const address = server.address();
      done(typeof address === 'object' && address ? address.port : port);
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, host);
  });
}

function urlHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

const SERVE_OPTIONS = {
  config: { type: 'string' },
  port: { type: 'string' },
  host: { type: 'string', default: '127.0.0.1' },
  'data-dir': { type: 'string' },
  demo: { type: 'boolean' },
  'admin-token-file': { type: 'string' },
  'log-level': { type: 'string', default: 'info' },
  socket: { type: 'string' },
  'socket-mode': { type: 'string', default: '600' },
  store: { type: 'string' },
  labels: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

type ServeValues = ReturnType<typeof parseArgs<{ options: typeof SERVE_OPTIONS }>>['values'];

/** `worker`: the daemon on loopback only, in a fleet, running the queued runs of its workspaces (docs/deployment.md: Workers). */
export async function worker(argv: string[]): Promise<void> {
  const values = serveArgs(argv, WORKER_USAGE);
  if (!values) return;
  if (values.host !== '127.0.0.1' || values.socket !== undefined) fail(`a worker answers on loopback only: it takes no --host or --socket\n${WORKER_USAGE}`);
  if (values.store === undefined && !process.env.HEADLESS_STORE_URL)
    fail(`a worker joins a fleet: give --store postgres://… (or HEADLESS_STORE_URL)\n${WORKER_USAGE}`);
  return daemon(values, 'worker');
}

/** `serve`: load and check everything, open the store, build the handler, listen, and stop gracefully on a signal. */
export async function serve(argv: string[]): Promise<void> {
  const values = serveArgs(argv, SERVE_USAGE);
  if (!values) return;
  return daemon(values, 'serve');
}

async function daemon(values: ServeValues, mode: 'serve' | 'worker'): Promise<void> {
  const cwd = process.cwd();
  const level = values['log-level'] as LogLevel;
  if (!LOG_LEVELS.includes(level)) fail(`--log-level must be one of ${LOG_LEVELS.join(', ')}, not "${level}"`);
  const logger = await daemonLogger(level);
  const inherited = closeInheritedDescriptors();
  if (inherited.length > 0) logger.debug({ descriptors: inherited }, 'closed the descriptors the daemon inherited, so no agent inherits them');
  const explicitPort = values.port !== undefined;
  const port = explicitPort ? Number(values.port) : DEFAULT_PORT;
  if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`--port must be an integer from 0 to 65535, not "${values.port}"`);
  const { config, admin } = checkedSetup(values, cwd, logger);
  const { store, dataDir, storeUrl } = await openStore(values, cwd, logger, mode === 'worker' ? WORKER_USAGE : SERVE_USAGE);
  // Off unless the standard OTEL_* variables ask for OTLP traces.
  const tracing = await daemonTracing(process.env, version);
  const api = { url: '' };
  const hidden = [config.file, dataDir.path, admin.file, values.socket && resolve(cwd, values.socket)].filter((p) => p !== undefined);
  const agentState = join(dataDir.path, 'agent-state');
  const worktreeRoot = join(dataDir.path, 'worktrees');
  const handler = await startHandler({ values, config, admin, store, tracer: tracing?.tracer, hidden, agentState, worktreeRoot, logger, api });
  // A size the operator chose wins.
  if (!youngGenerationChosen(process.execArgv, process.env.NODE_OPTIONS)) holdYoungGeneration(YOUNG_GENERATION_MB);
  const server = createNodeServer(handler);
  const host = values.host;
  const bound = await listenFrom(server, handler, { port, host, explicitPort });
  // Agents run on this host: give them a loopback URL even when bound to every interface.
  const agentHost = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  api.url = `http://${urlHost(agentHost)}:${bound}`;
  dataDir.listening(api.url);
  const socketPath = values.socket === undefined ? undefined : resolve(cwd, values.socket);
  const socket = socketPath === undefined ? undefined : await openSocket(handler, socketPath, values['socket-mode']);
  if (socketPath) logger.info({ socket: socketPath, mode: values['socket-mode'] }, 'listening on a Unix-domain socket');
  if (bound !== port && !explicitPort)
    logger.warn({ port: bound }, `port ${port} was taken, so this daemon listens on ${bound}: local callers find it in the data directory`);
  const servers = [server, ...(socket ? [socket] : [])];
  const done = () => {
    if (socketPath) rmSync(socketPath, { force: true });
    dataDir.release();
  };
  const stop = gracefulStop({ handler, logger, servers, done, tracing });
  // Before it says it listens: a SIGTERM with no listener would end the process at once.
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  logger.info(
    { url: `http://${urlHost(host)}:${bound}`, version, store: storeUrl === undefined ? 'sqlite' : 'postgres', mode, labels: labelsOf(values) },
    'listening',
  );
  process.stdout.write(`listening on http://${urlHost(host)}:${bound}\n`);
}

/** The parsed arguments; undefined once `--help` has been answered. */
function serveArgs(argv: string[], usage: string): ServeValues | undefined {
  let values: ServeValues;
  try {
    ({ values } = parseArgs({ args: argv, options: SERVE_OPTIONS, strict: true }));
  } catch (error) {
    fail(`${error instanceof Error ? error.message : String(error)}\n${usage}`);
  }
  if (!values.help) return values;
  process.stdout.write(`${usage}\n`);
  return undefined;
}

/** `--labels gpu,mac`, over the config file's `labels`; undefined when not given. */
function labelsOf(values: ServeValues): string[] | undefined {
  return values.labels?.split(',').map((label) => label.trim());
}

/** The config and admin token, with the refusals and warnings they call for. */
function checkedSetup(values: ServeValues, cwd: string, logger: pino.Logger) {
  let config: DaemonConfig;
  let admin: AdminToken = {};
  try {
    config = loadConfig(values.config, cwd);
    admin = readAdminToken(values['admin-token-file'], process.env);
  } catch (error) {
    fail(error instanceof Error ? error.message : String(error));
  }
  const loopbackBind = values.host === 'localhost' || isLoopbackAddress(values.host);
  if (!loopbackBind && admin.token === undefined) {
    fail(`refusing to listen on non-loopback address ${values.host} without an admin token: give --admin-token-file`, 1);
  }
  if (config.localCallers === 'token' && admin.token === undefined) fail('localCallers is "token" but there is no admin token: nobody could call', 1);
  for (const warning of startWarnings(admin, config, loopbackBind)) logger.warn(warning);
  return { config, admin };
}

/**
 * The data directory, claimed with any store (it holds this daemon's worktrees, its agents' state
 * and its address, so two daemons on one host never share them), and the store: SQLite in it, or
 * the PostgreSQL database `--store` names.
 */
async function openStore(values: ServeValues, cwd: string, logger: pino.Logger, usage: string) {
  const storeUrl = values.store ?? (process.env.HEADLESS_STORE_URL || undefined);
  if (storeUrl !== undefined && !/^postgres(ql)?:\/\//.test(storeUrl))
    fail(`--store must be a postgres:// URL (SQLite, the default, lives in --data-dir)\n${usage}`);
  try {
    const dataDir: DataDirClaim & { path: string } = openDataDir({ flag: values['data-dir'], env: process.env, cwd }, (line) => logger.info(line));
    if (storeUrl !== undefined) return { store: await createPostgresStore(storeUrl), dataDir, storeUrl };
    return { store: await createSqliteStore(dataDir.path), dataDir };
  } catch (error) {
    fail(error instanceof Error ? error.message : String(error), 1);
  }
}

interface HandlerSetup {
  values: ServeValues;
  config: DaemonConfig;
  admin: AdminToken;
  store: HeadlessStore;
  tracer: HeadlessHandlerOptions['tracer'];
  /** What no sandboxed run may see: the config, data directory, token file and socket. */
  hidden: string[];
  /** Where sandboxed agents keep each workspace's state: in the data directory. */
  agentState: string;
  /** Where runs' worktrees are made: in the data directory. */
  worktreeRoot: string;
  logger: pino.Logger;
  /** The URL runs are given, known once the port is bound. */
  api: { url: string };
}

/** The handler, ready (its store loaded, crash recovery done); a refusal says why and leaves nothing running. */
async function startHandler(o: HandlerSetup): Promise<HeadlessHandler> {
  const { values, config, store, api } = o;
  const webhookSecret = process.env.HEADLESS_WEBHOOK_SECRET || undefined;
  const env = inheritedEnv(process.env, config.inheritEnv);
  for (const name of SERVICE_SECRETS) delete env[name];
  let handler: HeadlessHandler;
  try {
    handler = createHeadlessHandler({
      workspaces: config.workspaces,
      agents: values.demo ? { ...config.agents, demo: demoAgent() } : config.agents,
      store,
      adminToken: o.admin.token,
      localCallers: config.localCallers,
      maxConcurrentRuns: config.maxConcurrentRuns,
      labels: labelsOf(values) ?? config.labels,
      stallTimeoutMs: config.stallTimeoutMs,
      prices: config.prices,
      secrets: config.secrets,
      maxMemoryMb: config.maxMemoryMb,
      minFreeMemoryMb: config.minFreeMemoryMb,
      queue: config.queue,
      schedules: config.schedules,
      triggers: config.triggers,
      tracer: o.tracer,
      sandbox: { hidden: o.hidden, readable: config.sandbox?.readable, agentState: o.agentState, user: config.sandbox?.user },
      worktreeRoot: o.worktreeRoot,
      defaultAgent: values.demo ? 'demo' : config.defaultAgent,
      publicHosts: config.publicHosts,
      logger: o.logger,
      retentionDays: config.retentionDays,
      instanceLeaseMs: config.instanceLeaseMs,
      // The secret may come from the environment, so it need not sit in the config file.
      webhooks: { ...config.webhooks, ...(webhookSecret === undefined ? {} : { secret: webhookSecret }) },
      env,
      // Known only once the port is bound; read per request.
      get apiUrl() {
        return api.url;
      },
    });
  } catch (error) {
    // A bad webhook URL or secret in the config: say which.
    await store.close();
    fail(error instanceof Error ? error.message : String(error));
  }
  try {
    await handler.ready;
  } catch (error) {
    // The store is unreadable, or the fleet's tables cannot be made: say so, and leave nothing running.
    await handler.close().catch(() => undefined);
    fail(`cannot start: ${error instanceof Error ? error.message : String(error)}`, 1);
  }
  return handler;
}

/** Listens on `port`, or (not chosen by the operator) the next free one of a few. */
async function listenFrom(server: Server, handler: HeadlessHandler, o: { port: number; host: string; explicitPort: boolean }): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await listen(server, o.port + attempt, o.host);
    } catch (error) {
      const inUse = (error as NodeJS.ErrnoException).code === 'EADDRINUSE';
      if (inUse && !o.explicitPort && attempt + 1 < PORT_TRIES && o.port + attempt < 65535) continue;
      await handler.close();
      fail(inUse ? `port ${o.port + attempt} is already in use` : `cannot listen on ${o.host}:${o.port + attempt}: ${(error as Error).message}`, 1);
    }
  }
}

/** The graceful shutdown a signal starts: within 10 s, answering reads meanwhile. */
function gracefulStop(o: { handler: HeadlessHandler; logger: pino.Logger; servers: Server[]; done: () => void; tracing?: { shutdown(): Promise<void> } }) {
  let stopping = false;
  return () => {
    if (stopping) return;
    stopping = true;
    o.logger.info('shutting down: running runs are stopped and recorded interrupted');
    // A hard deadline: shutdown is promised within 10 s.
    setTimeout(() => process.exit(1), 9500).unref();
    // Keep listening while runs stop, so new starts get 503 shutting_down and reads still answer.
    void o.handler
      .close()
      .catch((error: unknown) => o.logger.error({ err: error }, 'shutdown failed'))
      // The last runs' spans are sent before the process exits.
      .then(() => o.tracing?.shutdown())
      .finally(() => {
        for (const server of o.servers) {
          server.close();
          server.closeAllConnections();
        }
        o.done();
        o.logger.info('stopped');
        process.exit(0);
      });
  };
}
