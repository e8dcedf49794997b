/**
 * @module A run's spec, resolved once when it is accepted (docs/internals.md: The run spec): the
 * start's own fields over its schedule's or trigger's defaults, over its workspace's. The layers
 * an operator configured override one another; a start (a caller) may tighten what they confine
 * and cap, never loosen it. What is resolved is stored on the record and read from there.
 */
import * as v from 'valibot';
import type { ApprovalPolicy, RunBudget, RunPolicy } from '../../contract/records';
import {
  CEILINGS,
  PERMISSIONS,
  type Permissions,
  RUN_SPEC_KEYS,
  type RunSpec,
  RunSpecSchema,
  TIMEOUT_CAP,
  TIMEOUT_DEFAULT,
  arrayForObject,
} from '../../contract/run-spec';
import { approvalPolicy } from '../approvals/approval-policy';
import type { RunSource } from '../../contract/records';
import { mergePublish, publishLoosened } from './publish-spec';
import { schemaProblem } from './structured-output';

/** A spec with every default filled in: what the record stores. */
export interface ResolvedSpec extends Omit<RunSpec, 'approvals'> {
  timeoutMs: number;
  permissions: Permissions;
  sandbox: boolean;
  isolation: string;
  /** Under `permissions: "ask"` only, its fields filled in. */
  approvals?: ApprovalPolicy;
}

/** The layers a run's spec is resolved from. */
export interface SpecLayers {
  /** The installation's own (its guards): the lowest operator layer. */
  installation?: RunSpec;
  /** Its workspace's `run` defaults. */
  workspace?: RunSpec;
  /** Its schedule's or trigger's `run` defaults. */
  origin?: RunSpec;
  /** What its start asked. */
  request?: RunSpec;
  /** Its workspace's `publishTo.fromStarts`: a start may ask for a push or pull request its operator's layers do not. */
  publishFromStarts?: boolean;
}

/** A start that asked to loosen what its workspace, schedule or trigger set: the field, and why. */
export interface SpecRefusal {
  field: string;
  detail: string;
}

export type SpecDecision = { spec: ResolvedSpec } | { refused: SpecRefusal };

/** Resolves a run's spec, or refuses a start that would loosen its operator's confinement or caps. */
export function resolveSpec(layers: SpecLayers): SpecDecision {
  const operator = over(over(layers.installation ?? {}, layers.workspace ?? {}), layers.origin ?? {});
  const request = layers.request ?? {};
  const asked = over(operator, request);
  const refused = loosening(operator, request) ?? (layers.publishFromStarts ? undefined : publishLoosened(operator.publish, asked.publish));
  if (refused) return { refused };
  const permissions = asked.permissions ?? 'full';
  const isolation = asked.isolation ?? 'none';
  const { approvals, ref, ...rest } = asked;
  return {
    spec: {
      ...rest,
      // A layer from the library or the config is clamped as a start's is.
      timeoutMs: Math.min(asked.timeoutMs ?? TIMEOUT_DEFAULT, TIMEOUT_CAP),
      permissions,
      sandbox: asked.sandbox ?? false,
      isolation,
      ...(isolation === 'none' ? {} : { ref: ref ?? 'HEAD' }),
      ...(permissions === 'ask' ? { approvals: approvalPolicy({}, approvals) } : {}),
    },
  };
}

/** `top`'s fields over `base`'s; approvals field by field. */
function over(base: RunSpec, top: RunSpec): RunSpec {
  const merged: RunSpec = { ...base };
  for (const key of RUN_SPEC_KEYS) if (top[key] !== undefined) Object.assign(merged, { [key]: top[key] });
  if (base.approvals && top.approvals) merged.approvals = { ...base.approvals, ...strip(top.approvals) };
  if (base.publish && top.publish) merged.publish = mergePublish(base.publish, top.publish);
  return merged;
}

const strip = <T extends object>(o: T): Partial<T> => Object.fromEntries(Object.entries(o).filter(([, value]) => value !== undefined)) as Partial<T>;

/**
 * Whether a spec resolved by another member of a fleet (from what this one's workspace advertised,
 * or another member's own config) loosens this instance's own layers: the member that runs a run
 * holds it to its own workspace's and installation's confinement and caps.
 */
export function loosens(own: Omit<SpecLayers, 'request'>, spec: RunSpec): SpecRefusal | undefined {
  const operator = over(over(own.installation ?? {}, own.workspace ?? {}), own.origin ?? {});
  // A resolved spec says all it asks: a cap it lacks is no cap, a sandbox it lacks is none.
  return confinementLoosened(operator, { permissions: 'full', sandbox: false, ...spec }, true);
}

function loosening(operator: RunSpec, request: RunSpec): SpecRefusal | undefined {
  const confined = confinementLoosened(operator, request);
  if (confined) return confined;
  // A check is a shell command the service runs as the agent runs: past what a read-only or asking
  // agent may do, unless a sandbox confines it (its operator's own checks are the operator's choice).
  const strict = over(operator, request);
  if (request.verify?.checks && (strict.permissions ?? 'full') !== 'full' && !strict.sandbox)
    return {
      field: 'verify',
      detail: `its runs are "${strict.permissions}" without a sandbox, and a check runs any command; a start may give checks to such runs only in a sandbox`,
    };
  return undefined;
}

/** What the agent may do, where, and how much: a request may only tighten it (`whole`: what it does not cap is uncapped). */
function confinementLoosened(operator: RunSpec, request: RunSpec, whole = false): SpecRefusal | undefined {
  const set = operator.permissions ?? 'full';
  if (request.permissions !== undefined && PERMISSIONS.indexOf(request.permissions) < PERMISSIONS.indexOf(set))
    return { field: 'permissions', detail: `its workspace's runs are "${set}"; a start may only ask for stricter` };
  if (request.sandbox === false && operator.sandbox === true)
    return { field: 'sandbox', detail: "its workspace's runs are sandboxed; a start cannot turn that off" };
  for (const key of CEILINGS) {
    const cap = operator[key];
    const asked = request[key];
    if (cap !== undefined && (asked === undefined ? whole : asked > cap)) return { field: key, detail: `at most ${cap}, what its operator allows` };
  }
  return undefined;
}

/** What the agent may do and where, as the record's `policy` shows it; undefined when unconfined in its workspace's folder. */
export function policyOf(spec: ResolvedSpec): RunPolicy | undefined {
  const { permissions, sandbox, isolation } = spec;
  if (permissions === 'full' && !sandbox && isolation === 'none') return undefined;
  return {
    permissions,
    ...(spec.approvals ? { approvals: spec.approvals } : {}),
    sandbox,
    // A worktree run's policy is what it was before providers had names: its `worktree` names it.
    ...(isolation === 'worktree' ? { worktree: { ref: spec.ref ?? 'HEAD' } } : isolation === 'none' ? {} : { isolation }),
  };
}

/** The budget it was asked for, if any. */
export function budgetOf(spec: RunSpec): RunBudget | undefined {
  const { maxTurns, maxTokens, maxCostUsd } = spec;
  const budget: RunBudget = strip({ maxTurns, maxTokens, maxCostUsd });
  return Object.keys(budget).length > 0 ? budget : undefined;
}

/**
 * Throws, naming where, on a layer of defaults that cannot work (a library caller's, or the
 * config file's before it is read): the run spec's own schema, and `agent` only where allowed.
 */
export function checkSpecLayer(layer: unknown, where: string, a: { agent: boolean }): RunSpec | undefined {
  if (layer === undefined) return undefined;
  if (typeof layer !== 'object' || layer === null || Array.isArray(layer)) throw new Error(`${where}: run must be an object`);
  const array = arrayForObject(layer as Record<string, unknown>);
  if (array !== undefined) throw new Error(`${where}: run.${array} must be an object`);
  if (!a.agent && 'agent' in layer) throw new Error(`${where}: run.agent is not a workspace default (a workspace chooses by headlessAgent and defaultAgent)`);
  const result = v.safeParse(RunSpecSchema, layer);
  if (result.success) {
    const schema = result.output.outputSchema === undefined ? undefined : schemaProblem(result.output.outputSchema);
    if (schema !== undefined) throw new Error(`${where}: run.outputSchema is invalid: ${schema}`);
    return result.output;
  }
  const [issue] = result.issues;
  const field = issue.path?.map((p) => String(p.key)).join('.') ?? '';
  const unknown = issue.type === 'strict_object' && issue.expected === 'never';
  throw new Error(`${where}: ${unknown ? `unknown key run.${field}` : `run.${field} is invalid: expected ${issue.expected ?? 'another value'}`}`);
}

/** The keys of the run spec: a definition that sets one outside `run` is refused, naming where it moved (the config's shape before the spec). */
export function refuseMovedKeys(definition: object, where: string, keys: readonly string[] = RUN_SPEC_KEYS): void {
  const moved = keys.find((key) => key in definition);
  if (moved !== undefined) throw new Error(`${where}: "${moved}" has moved into the run spec: write it as "run": { "${moved}": … }`);
}

/** Schedules or triggers, by name, with their run defaults. */
type Origins = ReadonlyArray<{ name: string; run?: RunSpec }>;

/** The run defaults of the schedule or trigger a run came from, where it is configured here. */
export function originLayer(options: { schedules?: Origins; triggers?: Origins }, source: RunSource | undefined): RunSpec | undefined {
  if (source?.kind === 'schedule') return options.schedules?.find((s) => s.name === source.name)?.run;
  if (source?.kind === 'trigger') return options.triggers?.find((t) => t.name === source.name)?.run;
  return undefined;
}
