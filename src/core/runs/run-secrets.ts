/**
 * @module Per-run secrets (docs/security.md: Per-run secrets): values a start gives its run's agent
 * and checks as environment variables, held in this process's memory only, never on the record,
 * the timeline, an output, a log, a trace or a webhook; a value that shows in what the run prints
 * or sends is redacted there. A start may name the operator's secrets instead: only the name is
 * recorded, and the member that runs it reads the value from its own configuration.
 */
import type { RunSecret } from '../../contract/records';
import type { SecretValue } from '../../contract/requests';
import { Refusal } from '../../contract/problems';

/** How a value shows in what a run prints or sends: as it is, and escaped inside a JSON string. */
const formsOf = (value: string): string[] => {
  const escaped = JSON.stringify(value).slice(1, -1);
  // JSON may also escape a slash (`\/`), as PHP's and some Go encoders do.
  return [...new Set([value, escaped, escaped.replaceAll('/', '\\/')])];
};

export interface SecretsAccepted {
  /** What the record keeps: names, and the operator's secret each reference names. */
  recorded: RunSecret[];
  /** The values the start gave, to hold in memory until the run ends. */
  given: Record<string, string>;
}

export class RunSecrets {
  /** The values starts gave, by run: only while the run is queued or running. */
  private readonly held = new Map<string, Record<string, string>>();
  /** The redactors of runs that have not ended. */
  private readonly redactors = new Map<string, Redact>();

  constructor(
    /** The operator's named secrets (`secrets` in the config), read once. */
    private readonly named: ReadonlyMap<string, string>,
  ) {}

  /**
   * A start's secrets, checked: references name the operator's secrets; values are held in one
   * process's memory only, so where another member may take the run (`shared`) only references go.
   */
  accept(asked: Record<string, SecretValue> | undefined, o: { shared: boolean }): SecretsAccepted | undefined {
    if (asked === undefined || Object.keys(asked).length === 0) return undefined;
    const recorded: RunSecret[] = [];
    const given: Record<string, string> = {};
    for (const [name, value] of Object.entries(asked)) {
      if (typeof value !== 'string') {
        if (!this.named.has(value.secret)) {
          const known = [...this.named.keys()];
          throw new Refusal(
            'invalid_body',
            `Field "secrets.${name}" names no secret of the operator's ("${value.secret}"): ${known.length ? `it has ${known.join(', ')}` : 'none are configured'}.`,
          );
        }
        recorded.push({ name, secret: value.secret });
        continue;
      }
      if (o.shared) {
        throw new Refusal(
          'invalid_body',
          `Field "secrets.${name}" is a value, which one member holds in memory only, while another member may run this start: name one of the operator's secrets ({ "secret": "<name>" }) instead.`,
        );
      }
      recorded.push({ name });
      given[name] = value;
    }
    return { recorded, given };
  }

  /** The operator's named values: no run sees them but one that names them. */
  namedValues(): ReadonlyMap<string, string> {
    return this.named;
  }

  hold(taskId: string, given: Record<string, string>): void {
    if (Object.keys(given).length > 0) this.held.set(taskId, given);
  }

  drop(taskId: string): void {
    this.held.delete(taskId);
    this.redactors.delete(taskId);
  }

  /** The run's variables; `lost`: a value it was given is no longer held (this process is not the one that accepted it). */
  envOf(taskId: string, recorded: RunSecret[] | undefined): { env: Record<string, string> } | { lost: string[] } {
    const env: Record<string, string> = {};
    const lost: string[] = [];
    for (const secret of recorded ?? []) {
      const value = secret.secret === undefined ? this.held.get(taskId)?.[secret.name] : this.named.get(secret.secret);
      if (value === undefined) lost.push(secret.name);
      else env[secret.name] = value;
    }
    return lost.length > 0 ? { lost } : { env };
  }

  /** What takes each of the run's values out of a text (runs/run-secrets.ts `redactText`), where it was given any; kept while it runs. */
  redactor(taskId: string, recorded: RunSecret[] | undefined): Redact | undefined {
    const given = this.envOf(taskId, recorded);
    if ('lost' in given) return undefined;
    const forms = Object.entries(given.env).flatMap(([name, value]) => formsOf(value).map((form) => ({ form, name })));
    if (forms.length === 0) return undefined;
    const redact: Redact = (text, cut) => redactText(text, forms, cut);
    this.redactors.set(taskId, redact);
    return redact;
  }

  /** The redactor of a running run, for a run that reads its work (its grader sees the files its agent wrote). */
  redactorOf(taskId: string | undefined): Redact | undefined {
    return taskId === undefined ? undefined : this.redactors.get(taskId);
  }
}

/** The shortest end of a value that counts as the value cut by a tail (fewer would take innocent text). */
const CUT_MIN = 4;

/** Takes a run's secrets out of a text; `cut`: the text is a tail that may begin inside one. */
export type Redact = (text: string, cut?: boolean) => string;

/**
 * Replaces every place a value shows, overlapping ones merged (so no part of any value is left),
 * and, in a tail (`cut`), a value's end where the text begins with it.
 */
export function redactText(text: string, forms: ReadonlyArray<{ form: string; name: string }>, cut = false): string {
  const spans: Array<{ from: number; to: number; name: string }> = [];
  for (const { form, name } of forms) {
    for (let at = text.indexOf(form); at !== -1; at = text.indexOf(form, at + 1)) spans.push({ from: at, to: at + form.length, name });
    // A tail cut inside a character begins with replacement characters: the value's end follows them.
    const lead = cut ? (/^\uFFFD*/.exec(text)?.[0].length ?? 0) : 0;
    for (let k = form.length - 1; cut && k >= CUT_MIN; k--) {
      if (text.startsWith(form.slice(-k), lead)) {
        spans.push({ from: 0, to: lead + k, name });
        break;
      }
    }
  }
  if (spans.length === 0) return text;
  spans.sort((a, b) => a.from - b.from);
  let out = '';
  let at = 0;
  for (let i = 0; i < spans.length; ) {
    const first = spans[i] as { from: number; to: number; name: string };
    let to = first.to;
    const names = new Set([first.name]);
    for (i++; i < spans.length && (spans[i]?.from ?? Infinity) < to; i++) {
      to = Math.max(to, spans[i]?.to ?? to);
      names.add(spans[i]?.name ?? first.name);
    }
    out += `${text.slice(at, first.from)}[secret ${[...names].join(', ')}]`;
    at = to;
  }
  return out + text.slice(at);
}

/** A JSON value with the run's secrets taken out of every string in it (decoded: an escape the raw line hid is caught here). */
export function redactValue<T>(value: T, redact: Redact | undefined): T {
  if (redact === undefined) return value;
  // Each string on its own (keys too): a value can never span a JSON delimiter and break the whole.
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return redact(v);
    if (Array.isArray(v)) return v.map(walk);
    if (v === null || typeof v !== 'object') return v;
    return Object.fromEntries(Object.entries(v).map(([k, inner]) => [redact(k), walk(inner)]));
  };
  return walk(value) as T;
}
