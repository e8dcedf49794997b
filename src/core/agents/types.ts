/** What an agent adapter is: how to start its CLI headless, and how to read what it printed. */
import type { RunBudget, RunUsage } from '../../contract/records';

/** A permission an agent asks for, as its protocol reads it (docs/approvals.md). */
export interface PermissionQuestion {
  title: string;
  kind?: string;
  /** The files it names, as the agent gave them. */
  paths: string[];
  /** The agent offers to remember an allow for its session. */
  canAlways: boolean;
  /** The tool call's arguments, as the agent gave them: all of them are shown to the approver. */
  input?: Readonly<Record<string, unknown>>;
}

/** The answer an agent is given. */
export interface PermissionDecision {
  allow: boolean;
  /** Remember it for the run (the agent is offered its own "always" where it has one). */
  always: boolean;
}

export interface AgentRunInput {
  prompt: string;
  workspacePath: string;
  /** The product Session id. */
  resumeId: string;
  /** Set when resuming: the agent's own session id captured from an earlier run. */
  agentSessionId?: string;
  /**
   * `read-only`: no edits and no commands, by the CLI's own flags (only asked of an adapter with
   * `readOnly`). `ask`: it must ask for each permission (only given to an agent whose protocol `asks`).
   */
  permissions: 'full' | 'read-only' | 'ask';
  /** True when the service's sandbox confines the run: a CLI's own sandbox, which needs user namespaces the service's withholds, must stand aside. */
  sandboxed?: boolean;
  /** The run's budget: an adapter passes the limits its CLI enforces itself; the service enforces them all from the events. */
  budget?: RunBudget;
  /** The JSON Schema its answer must match, and a file holding it (docs/structured-output.md): only given to an adapter with `structuredOutput: "native"`. */
  outputSchema?: { schema: Record<string, unknown>; file: string };
}

export interface AgentInvocation {
  command: string;
  args: string[];
  /** Fed to stdin, which is then closed. Absent: stdin is closed. */
  stdin?: string;
  /** Added to the run's environment. */
  env?: Record<string, string>;
}

export interface AgentVerdict {
  /** The agent's own session id, as read from its output (or named by the adapter). */
  agentSessionId?: string;
  /** Set when the output says the run failed, even if the process exited 0: the agent's own reason. */
  error?: string;
  /**
   * False when the output shows the agent never got an answer from its model (it failed at its
   * first call): a session id from such a run is not kept for resume. Absent: unknown.
   */
  answered?: boolean;
  /** Tokens (and cost) the agent reported, where it does. */
  usage?: RunUsage;
  /** Its final assistant text, where it prints it. */
  lastMessage?: string;
  /** Set when the agent stopped itself at a limit of the run's budget it was given (claude's `--max-turns`). */
  limit?: keyof RunBudget;
  /** Its structured answer, where its CLI reports one (claude's `structured_output`, qwen's `structured_result`). */
  structured?: { value: unknown };
}

/**
 * What a line of the agent's output meant, normalised across agents: the run's event timeline
 * (docs/http-api.md: Follow a run) is built from these. Never the full input of a tool.
 */
export type AgentEvent =
  | { type: 'message'; text: string }
  | { type: 'tool'; name: string; status: 'started' | 'succeeded' | 'failed'; id?: string }
  | { type: 'usage'; usage: RunUsage }
  | { type: 'error'; message: string };

/** Reads one run's stdout, line by line, then judges it together with the exit code. */
export interface AgentOutputParser {
  /** Reads a line; returns the events it carried, if any. */
  // biome-ignore lint/suspicious/noConfusingVoidType: a custom adapter's parser may return nothing at all.
  line(line: string): AgentEvent[] | void;
  /** The agent's session id as soon as it is known, so a run cut short by a crash stays resumable. */
  sessionId(): string | undefined;
  finish(exitCode: number | null): AgentVerdict;
}

/** How to tell the real CLI from another executable of the same name. */
export interface AgentIdentity {
  /** Run with these arguments (stdin closed, a few seconds at most)... */
  args: string[];
  /** ...its stdout and stderr together must match. */
  pattern: RegExp;
}

/** Where the CLI finds its credentials; any one of them is enough. Names only, never values. */
export interface AgentCredentials {
  /** Environment variables. */
  env: string[];
  /** Files, relative to `HOME`, or to a variable's folder when written `$VAR/file` (skipped when it is unset). */
  files?: string[];
  /**
   * Without any, the CLI never ends by itself (it waits for an interactive login, or retries
   * forever), so a run without any fails at once with `spawn_failed` instead of sitting until
   * the watchdog.
   */
  required?: boolean;
}

/**
 * How the service talks with one run's agent once it is started: what it writes to it, and how
 * it reads what it prints. Today's CLIs speak `lines` (the prompt given on start, stdout read
 * line by line through the adapter's parser: agents/protocols/lines.ts); a protocol that talks
 * back (JSON-RPC over stdio) keeps stdin open and writes through `io.write`.
 */
export interface AgentProtocol {
  readonly name: string;
  /** Keep the agent's stdin open for `io.write`. */
  readonly talksBack: boolean;
  /** The agent asks for its permissions through it (`io.ask`), so a run's `permissions: "ask"` can be answered. */
  readonly asks: boolean;
  /** When a turn ends it asks for the next prompt (`io.next`) on its open session: a run goes on without a resume. */
  readonly continues?: boolean;
  open(io: AgentIO, input: AgentRunInput): AgentConversation;
  /** What the agent says of itself over this protocol, asked without a prompt (`doctor`): ACP's `initialize`. */
  handshake?(start: { file: string; args: string[]; env: Record<string, string>; cwd: string }): Promise<ProtocolFacts>;
}

/** What an agent said of itself over its protocol. */
export interface ProtocolFacts {
  protocol: string;
  /** Its protocol version. */
  version?: number;
  /** It can load an earlier session, so its Sessions can be resumed. */
  loadSession?: boolean;
  /** Why it could not be asked (it did not answer, or answered with an error). */
  error?: string;
}

/** What a protocol can do to its run. */
export interface AgentIO {
  /** Writes to the agent's stdin (a protocol that `talksBack`). */
  write(data: string): void;
  /** Closes the agent's stdin: its turn is over (a protocol that `talksBack`). */
  end(): void;
  /** An event of the run's timeline. */
  emit(event: AgentEvent): void;
  /** The agent asks for a permission: the run's policy answers, or a caller (docs/approvals.md). */
  ask(question: PermissionQuestion): Promise<PermissionDecision>;
  /**
   * A turn ended with the agent still running and its session open (ACP), with `verdict`: the
   * next prompt on that session, as the run's turn policies decide, or undefined to end it.
   */
  next(verdict: AgentVerdict): Promise<string | undefined>;
}

/** One run's exchange with its agent. */
export interface AgentConversation {
  /** A line the agent printed on stdout. */
  line(line: string): void;
  /** The agent's session id as soon as it is known, so a run cut short by a crash stays resumable. */
  sessionId(): string | undefined;
  /** The process ended: the verdict on the run. */
  finish(exitCode: number | null): AgentVerdict;
}

export interface AgentAdapter {
  name: string;
  /** Only `agent` can run headless; `utility` agents and the `shell` adapter have no model loop. */
  kind: 'agent' | 'utility' | 'shell';
  /** The executable the adapter runs, checked on the PATH at request time. */
  command: string;
  supportsResume: boolean;
  identity?: AgentIdentity;
  credentials?: AgentCredentials;
  /** What is wrong with how it was set up (a custom agent's config), each saying what to do; `doctor` reports them. */
  setupProblems?: string[];
  /** Arguments that print the usage of its headless mode; `doctor` checks the flags it passes are there. */
  help?: string[];
  /** Flags it accepts but its usage does not list (the real-CLI tier proves they are accepted); `doctor` does not ask for them. */
  unlistedFlags?: string[];
  /** Whether its own flags can keep it from editing and running commands (`permissions: "read-only"`). */
  readOnly?: boolean;
  /**
   * `native`: its CLI takes the run's `outputSchema` and reports the answer itself (its verdict's
   * `structured`, else its final message as JSON). Otherwise the agent is told to answer with
   * `headless-inbox result` (docs/structured-output.md).
   */
  structuredOutput?: 'native';
  /** Where it keeps sessions and history, relative to `HOME` (a `.json` entry is a file): inside a sandbox, the workspace's own, writable. */
  stateDirs?: string[];
  /**
   * Its executable configuration (settings with hooks, MCP servers, plugins, instructions), relative
   * to `HOME`: inside a sandbox only the operator's, read-only, with its `credentials.files`.
   */
  config?: string[];
  invocation(input: AgentRunInput): AgentInvocation;
  /** The parser of the `lines` protocol. */
  parser(input: AgentRunInput): AgentOutputParser;
  /** How the service talks with it. @default `lines` over `parser` */
  protocol?: AgentProtocol;
  /** How it is spoken to under `permissions: "ask"`, when its usual protocol cannot ask (claude's control messages). */
  asking?: AgentProtocol;
}
