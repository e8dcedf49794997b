/**
 * @module Who may answer a permission question (docs/approvals.md): a caller the gate lets in,
 * and never a run, whatever `localCallers` says: not with a run token, not through a sandbox's
 * egress proxy, not from any process of a running run's tree (found from the connection's peer,
 * Linux). An agent answering its own question, or another run's, is refused `403 approval_from_run`.
 */
import { HttpProblem } from '../../contract/problems';
import { type RunProcesses, runOfProcess } from '../process/run-membership';
import { tcpPeerPids, unixPeerPids } from '../process/socket-peer';
import { forwardedForRun } from '../sandbox/egress-proxy';
import { type AuthContext, type RouteVerifier, verifierOf } from './auth';

const HAS_PROC = process.platform === 'linux';

export const CALLER_NOT_A_RUN: RouteVerifier = {
  name: 'caller, not a run',
  runTokens: 'none',
  security: [{}, { adminToken: [] }],
  async verify(request, context) {
    const { credential } = context.auth;
    if (credential.kind === 'run') throw fromRun(`run "${credential.grant.taskId}" (its run token)`);
    await verifierOf('caller').verify(request, context);
    const runs = context.services.runs.processes();
    if (runs.taskIds.size === 0) return;
    const run = await runBehind(context.auth, runs);
    if (run !== undefined) throw fromRun(run);
  },
};

/** The run a request comes from, described; undefined when it is no run's. Throws where that cannot be told. */
async function runBehind(auth: AuthContext, runs: RunProcesses): Promise<string | undefined> {
  if (!auth.unixSocket && forwardedForRun(auth.remoteAddress, auth.remotePort)) return 'a sandboxed run (through its egress proxy)';
  if (!HAS_PROC) return undefined;
  const pids = await peerPids(auth);
  if (pids === undefined) {
    throw new HttpProblem(
      'approval_from_run',
      'Cannot tell whether this answer comes from a run (the peer of this Unix socket is found with `ss`, from iproute2): answer over TCP, or install iproute2.',
    );
  }
  for (const pid of pids) {
    const taskId = runOfProcess(pid, runs);
    if (taskId !== undefined) return `run "${taskId}" (process ${pid} is of its process tree)`;
  }
  return undefined;
}

/** The processes at the other end of the request's connection: none known for a request that came by no socket. */
async function peerPids(auth: AuthContext): Promise<number[] | undefined> {
  if (auth.unixSocket) return auth.socketFd === undefined ? undefined : unixPeerPids(auth.socketFd);
  if (auth.remoteAddress === undefined || auth.remotePort === undefined) return [];
  return tcpPeerPids({ address: auth.remoteAddress, port: auth.remotePort, ...(auth.localPort === undefined ? {} : { localPort: auth.localPort }) });
}

function fromRun(who: string): HttpProblem {
  return new HttpProblem(
    'approval_from_run',
    `This answer comes from ${who}: an agent never answers a permission question, its own or another run's. A person or a script outside every run must answer (docs/approvals.md).`,
  );
}
