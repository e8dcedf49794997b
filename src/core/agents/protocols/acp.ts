/**
 * @module The `acp` protocol (docs/agents.md: ACP): the service is the Agent Client Protocol
 * client, through the ACP SDK. A run is `initialize`, then `session/new` (or `session/load` to
 * resume), then a `session/prompt` until its stop reason; the session stays open while the run's
 * turn policies (runs/turn-policy.ts) give it another prompt (`io.next`), then the agent's stdin
 * is closed and it exits. The client advertises no `fs/*` or `terminal/*` capability: the agent
 * works in its own workspace with its own tools, as over its other protocol. A permission it asks
 * for (`session/request_permission`) is the run's question (`io.ask`): its policy answers, or a
 * caller (docs/approvals.md).
 */
import type { RunUsage } from '../../../contract/records';
import { loadOptional } from '../../util/optional-package';
import { tokenCount } from '../reported-usage';
import type { AgentConversation, AgentEvent, AgentIO, AgentProtocol, AgentRunInput, AgentVerdict, ProtocolFacts } from '../types';

type Sdk = typeof import('@agentclientprotocol/sdk');
type SessionUpdate = import('@agentclientprotocol/sdk').SessionNotification['update'];
type PermissionRequest = import('@agentclientprotocol/sdk').RequestPermissionRequest;
type PermissionResponse = import('@agentclientprotocol/sdk').RequestPermissionResponse;
type StopReason = import('@agentclientprotocol/sdk').StopReason;
type ClientContext = import('@agentclientprotocol/sdk').ClientContext;

/** Loaded at the first ACP run: the SDK is ESM only, and most runs never need it. */
let sdk: Promise<Sdk> | undefined;
const loadSdk = (): Promise<Sdk> => {
  sdk ??= loadOptional(() => import('@agentclientprotocol/sdk'), '@agentclientprotocol/sdk', 'An agent over the Agent Client Protocol');
  return sdk;
};

/** The ACP protocol; `asks`: the agent asks before its tools in the mode it is started in, so `permissions: "ask"` can be answered. */
export const acpProtocol = (o: { asks: boolean }): AgentProtocol => ({
  name: 'acp',
  talksBack: true,
  asks: o.asks,
  continues: true,
  open: (io, input) => new AcpConversation(io, input),
  handshake,
});

const FINISHED = new Set(['completed', 'failed']);

/** One run's ACP connection, fed the agent's stdout lines and writing to its stdin. */
class AcpConversation implements AgentConversation {
  private incoming!: ReadableStreamDefaultController<Uint8Array>;
  private readonly encoder = new TextEncoder();
  private session: string | undefined;
  /** The agent message being streamed, flushed as one timeline message. */
  private message = '';
  private lastMessage: string | undefined;
  private answered = false;
  private stop: StopReason | undefined;
  private failure: string | undefined;
  /** While `session/load` replays the history: its updates are not this run's. */
  private replaying = false;
  private usage: RunUsage | undefined;

  constructor(
    private readonly io: AgentIO,
    private readonly input: AgentRunInput,
  ) {
    const readable = new ReadableStream<Uint8Array>({
      start: (controller) => {
        this.incoming = controller;
      },
    });
    const decoder = new TextDecoder();
    const writable = new WritableStream<Uint8Array>({ write: (chunk) => io.write(decoder.decode(chunk, { stream: true })) });
    void this.run(readable, writable)
      .catch((error: unknown) => {
        this.failure ??= error instanceof Error ? error.message : String(error);
      })
      .finally(() => io.end());
  }

  line(line: string): void {
    this.incoming.enqueue(this.encoder.encode(`${line}\n`));
  }

  sessionId(): string | undefined {
    return this.session;
  }

  private async run(readable: ReadableStream<Uint8Array>, writable: WritableStream<Uint8Array>): Promise<void> {
    const acp = await loadSdk();
    const app = acp
      .client({ name: 'headless-run-webhook' })
      .onNotification('session/update', ({ params }) => this.update(params.update))
      .onRequest('session/request_permission', async ({ params }) => this.permission(params));
    await app.connectWith(acp.ndJsonStream(writable, readable), async (ctx) => {
      const init = await ctx.request('initialize', { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
      const cwd = this.input.workspacePath;
      const resume = this.input.agentSessionId;
      if (resume !== undefined) {
        if (init.agentCapabilities?.loadSession !== true) throw new Error('the agent cannot load a session over ACP, so this Session cannot be resumed');
        this.replaying = true;
        await ctx.request('session/load', { sessionId: resume, cwd, mcpServers: [] });
        this.replaying = false;
        this.session = resume;
      } else {
        this.session = (await ctx.request('session/new', { cwd, mcpServers: [] })).sessionId;
      }
      await this.turns(ctx, this.session);
    });
  }

  /** Its prompt turns on the open session: the first prompt, then each the run asks for. */
  private async turns(ctx: ClientContext, sessionId: string): Promise<void> {
    let prompt: string | undefined = this.input.prompt;
    while (prompt !== undefined) {
      const answer = await ctx.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: prompt }] });
      this.stop = answer.stopReason;
      this.noteUsage(answer);
      prompt = await this.io.next(this.verdict(0));
      // A turn's verdict is its own: the run adds up the usage of its turns.
      if (prompt !== undefined) [this.message, this.lastMessage, this.answered, this.stop, this.usage] = ['', undefined, false, undefined, undefined];
    }
  }

  /** A `session/update`: the agent's message, its tool calls. */
  private update(update: SessionUpdate): void {
    if (this.replaying) return;
    if (update.sessionUpdate === 'agent_message_chunk') {
      if (update.content.type === 'text') this.message += update.content.text;
      this.answered = true;
    } else if (update.sessionUpdate === 'tool_call') {
      this.flush();
      this.answered = true;
      const name = update.kind ?? update.title;
      this.emit({ type: 'tool', name, status: 'started', id: update.toolCallId });
      if (update.status && FINISHED.has(update.status)) this.toolEnded(name, update.toolCallId, update.status);
    } else if (update.sessionUpdate === 'tool_call_update' && update.status && FINISHED.has(update.status)) {
      this.toolEnded(update.kind ?? update.title ?? 'tool', update.toolCallId, update.status);
    }
  }

  /**
   * The turn's tokens, from the prompt answer: its `usage` (ACP's draft field: opencode, goose,
   * copilot), else gemini's and qwen's `_meta.quota.token_count`.
   */
  private noteUsage(answer: { usage?: unknown; _meta?: Record<string, unknown> | null }): void {
    const usage = answer.usage as { inputTokens?: unknown; outputTokens?: unknown } | undefined;
    const quota = answer._meta?.quota as { token_count?: { input_tokens?: unknown; output_tokens?: unknown } } | undefined;
    const input = usage?.inputTokens ?? quota?.token_count?.input_tokens;
    const output = usage?.outputTokens ?? quota?.token_count?.output_tokens;
    if (typeof input !== 'number' || typeof output !== 'number') return;
    this.usage = { inputTokens: tokenCount(input), outputTokens: tokenCount(output) };
    this.emit({ type: 'usage', usage: this.usage });
  }

  private toolEnded(name: string, id: string, status: string): void {
    this.emit({ type: 'tool', name, status: status === 'completed' ? 'succeeded' : 'failed', id });
  }

  private emit(event: AgentEvent): void {
    this.io.emit(event);
  }

  /** The streamed message so far, as one timeline message. */
  private flush(): void {
    const text = this.message.trim();
    this.message = '';
    if (text === '') return;
    this.lastMessage = text;
    this.emit({ type: 'message', text });
  }

  /** The run's question: its answer picks the agent's matching option (its "always" one for an answer for the run). */
  private async permission(params: PermissionRequest): Promise<PermissionResponse> {
    const { toolCall, options } = params;
    const paths = (toolCall.locations ?? []).map((l) => l.path).slice(0, 20);
    const asked = this.io.ask({
      title: toolCall.title ?? toolCall.kind ?? 'a tool call',
      ...(toolCall.kind ? { kind: toolCall.kind } : {}),
      paths,
      canAlways: options.some((o) => o.kind === 'allow_always'),
      ...argumentsOf(toolCall.rawInput),
    });
    // A question that cannot be asked is refused.
    const decision = await asked.catch(() => ({ allow: false, always: false }));
    const kinds = decision.allow ? (decision.always ? ['allow_always', 'allow_once'] : ['allow_once', 'allow_always']) : ['reject_once', 'reject_always'];
    const option = kinds.map((kind) => options.find((o) => o.kind === kind)).find((o) => o !== undefined);
    return option ? { outcome: { outcome: 'selected', optionId: option.optionId } } : { outcome: { outcome: 'cancelled' } };
  }

  finish(exitCode: number | null): AgentVerdict {
    return this.verdict(exitCode);
  }

  /** The verdict on the last turn; `exitCode` 0 while the agent still runs. */
  private verdict(exitCode: number | null): AgentVerdict {
    this.flush();
    const verdict: AgentVerdict = { answered: this.answered };
    if (this.session !== undefined) verdict.agentSessionId = this.session;
    if (this.lastMessage !== undefined) verdict.lastMessage = this.lastMessage;
    if (this.usage !== undefined) verdict.usage = this.usage;
    const error = this.failure ?? stopError(this.stop) ?? (exitCode === 0 ? undefined : 'the agent exited before its turn ended');
    if (error !== undefined) verdict.error = error;
    if (this.stop === 'max_turn_requests') verdict.limit = 'maxTurns';
    return verdict;
  }
}

/** Why a stop reason is a failure; undefined for a turn that ended as it should. */
function stopError(stop: StopReason | undefined): string | undefined {
  if (stop === undefined) return 'the agent ended without finishing its turn';
  if (stop === 'refusal') return 'the agent refused to go on';
  if (stop === 'cancelled') return 'the turn was cancelled';
  if (stop === 'max_turn_requests') return 'the agent stopped at its own limit of model requests';
  return undefined;
}

/** How long `doctor` waits for an agent's `initialize` answer: long, for a busy machine. */
const HANDSHAKE_MS = 60_000;

/**
 * Starts the agent in its ACP mode, asks `initialize` and stops it: its protocol version and
 * whether it can load a session (`doctor`). Nothing is prompted, no session is made.
 */
async function handshake(start: { file: string; args: string[]; env: Record<string, string>; cwd: string }): Promise<ProtocolFacts> {
  const [acp, { spawn }, { Readable, Writable }] = await Promise.all([loadSdk(), import('node:child_process'), import('node:stream')]);
  const child = spawn(start.file, start.args, { cwd: start.cwd, env: start.env, stdio: ['pipe', 'pipe', 'ignore'], detached: true });
  child.on('error', () => undefined);
  child.stdin.on('error', () => undefined);
  const stop = () => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  };
  const timer = setTimeout(stop, HANDSHAKE_MS);
  try {
    const stream = acp.ndJsonStream(Writable.toWeb(child.stdin) as WritableStream<Uint8Array>, Readable.toWeb(child.stdout) as ReadableStream<Uint8Array>);
    let facts: ProtocolFacts = { protocol: 'acp' };
    await acp.client({ name: 'headless-run-webhook doctor' }).connectWith(stream, async (ctx) => {
      const init = await ctx.request('initialize', { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
      facts = { protocol: 'acp', version: init.protocolVersion, loadSession: init.agentCapabilities?.loadSession === true };
    });
    return facts;
  } catch (error) {
    return { protocol: 'acp', error: error instanceof Error ? error.message : String(error) };
  } finally {
    clearTimeout(timer);
    stop();
  }
}

/** A tool call's arguments: its raw input, an object of named arguments, or one value (`input`). */
function argumentsOf(raw: unknown): { input?: Record<string, unknown> } {
  if (raw === undefined || raw === null) return {};
  return { input: typeof raw === 'object' && !Array.isArray(raw) ? (raw as Record<string, unknown>) : { input: raw } };
}
