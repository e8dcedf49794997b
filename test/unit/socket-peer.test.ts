import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { type Server, type Socket, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { connectionOf } from '../../src/adapters/node';
import { runOfProcess } from '../../src/core/process/run-membership';
import { tcpPeerPids, unixPeerPids } from '../../src/core/process/socket-peer';

/** docs/approvals.md, Who answers: the process at the other end of a connection, and whether it is a run's. */
const linux = process.platform === 'linux';
const dir = mkdtempSync(join(tmpdir(), 'hrw-peer-'));
const children: ChildProcess[] = [];
afterAll(() => {
  // Each child leads a process group of its own: the nested one's grandchild goes with it.
  for (const child of children) {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

/** A child that connects to `target` (a port or a socket path) and stays; its env has the marker when given one; `nested`: through a grandchild whose environment is empty. */
function connector(target: number | string, env: NodeJS.ProcessEnv, nested = false): ChildProcess {
  const connect = `require('net').connect(${JSON.stringify(typeof target === 'number' ? { port: target, host: '127.0.0.1' } : { path: target })}); setInterval(() => {}, 1000)`;
  const code = nested
    ? `require('child_process').spawn(process.execPath, ['-e', ${JSON.stringify(connect)}], { env: {}, stdio: 'inherit' }); setInterval(() => {}, 1000)`
    : connect;
  const child = spawn(process.execPath, ['-e', code], { env, stdio: 'ignore', detached: true });
  children.push(child);
  return child;
}

async function accepted(server: Server, start: () => void): Promise<Socket> {
  const next = once(server, 'connection');
  start();
  const [socket] = (await next) as [Socket];
  return socket;
}

const listening = async (server: Server, ...args: unknown[]) => {
  server.listen(...(args as [number, string]));
  await once(server, 'listening');
  return server;
};

describe.runIf(linux)('socket peers', () => {
  it('a loopback TCP peer is found: a run process by its marker, one with no marker by its ancestor, the test itself is none', async () => {
    const server = await listening(createServer(), 0, '127.0.0.1');
    const port = (server.address() as { port: number }).port;
    const runs = (agent: number) => ({ pids: new Map([[agent, 'run_tree']]), taskIds: new Set(['run_marked', 'run_tree']) });
    const peerOf = async (socket: Socket) => {
      const { remoteAddress = '', remotePort = 0, localPort } = connectionOf(socket);
      return tcpPeerPids({ address: remoteAddress, port: remotePort, ...(localPort === undefined ? {} : { localPort }) });
    };

    const marked = connector(port, { ...process.env, HEADLESS_TASK_ID: 'run_marked' });
    const [markedPid] = (await peerOf(await accepted(server, () => undefined))) ?? [];
    expect(markedPid).toBe(marked.pid);
    expect(runOfProcess(markedPid as number, runs(-1))).toBe('run_marked');

    const agent = connector(port, { PATH: process.env.PATH ?? '' }, true);
    const [grandchild] = (await peerOf(await accepted(server, () => undefined))) ?? [];
    expect(grandchild).not.toBe(agent.pid);
    expect(runOfProcess(grandchild as number, runs(agent.pid as number))).toBe('run_tree');
    expect(runOfProcess(grandchild as number, runs(-1))).toBeUndefined();

    const own = await accepted(server, () => void import('node:net').then((net) => net.connect(port, '127.0.0.1')));
    const ownPeers = (await peerOf(own)) ?? [];
    expect(ownPeers).toEqual([process.pid]);
    expect(runOfProcess(process.pid, runs(agent.pid as number))).toBeUndefined();
    server.close();
  });

  it('a Unix-socket peer is found (with ss)', async () => {
    const path = join(dir, 'peer.sock');
    const server = await listening(createServer(), path as unknown as number);
    const marked = connector(path, { ...process.env, HEADLESS_TASK_ID: 'run_marked' });
    const socket = await accepted(server, () => undefined);
    const fd = connectionOf(socket).socketFd;
    expect(fd).toBeTypeOf('number');
    expect(await unixPeerPids(fd as number)).toEqual([marked.pid]);
    server.close();
  });

  it('a remote peer has no local process', async () => {
    expect(await tcpPeerPids({ address: '203.0.113.9', port: 40000 })).toEqual([]);
  });
});
