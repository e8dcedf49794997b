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
const formsOf = (value: string): string[] => [...new Set([value, JSON.stringify(value).slice(1, -1)])];

export interface SecretsAccepted {
  /** What the record keeps: names, and the operator's secret each reference names. */
  recorded: RunSecret[];
  /** The values the start gave, to hold in memory until the run ends. */
  given: Record<string, string>;
}

export class RunSecrets {
  /** The values starts gave, by run: only while the run is queued or running. */
  private readonly held = new Map<string, Record<string, string>>();

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

  /** What takes each of the run's values out of a text (longest first, so one holding another goes whole). */
  redactor(taskId: string, recorded: RunSecret[] | undefined): ((text: string) => string) | undefined {
    const given = this.envOf(taskId, recorded);
    if ('lost' in given) return undefined;
    const pairs = Object.entries(given.env)
      .flatMap(([name, value]) => formsOf(value).map((form) => [form, `[secret ${name}]`] as const))
      .sort((a, b) => b[0].length - a[0].length);
    if (pairs.length === 0) return undefined;
    return (text) => pairs.reduce((out, [form, shown]) => (out.includes(form) ? out.split(form).join(shown) : out), text);
  }
}
