/**
 * @module A workspace's `publishTo` (docs/worktrees.md: Publishing): checked when it is listed, and
 * its token read by the service as it publishes. The token is the operator's: the service reads it
 * from where the config points (its value, an environment variable, a file) and hands it to its own
 * git process and forge calls only; no run's environment ever holds it (resources.ts: held secrets).
 */
import { isAbsolute } from 'node:path';
import type { PublishSpec } from '../../contract/run-spec';
import type { PublishSettings, Workspace } from '../types';
import { readSecret } from '../util/secret-source';

const GITHUB_REPOSITORY = /^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/;
const GITLAB_PROJECT = /^([0-9]+|[A-Za-z0-9_.-]+(\/[A-Za-z0-9_.-]+)+)$/;

/** An http(s) URL without a credential in it, or why not. */
function webUrlProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'is not a URL';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must be an https:// or http:// URL';
  if (url.username !== '' || url.password !== '') return 'must not hold a credential (give it as "token")';
  return undefined;
}

/** Throws, naming where, on `publishTo` settings that cannot work. */
export function checkPublishSettings(p: PublishSettings, where: string): void {
  const remote = isAbsolute(p.remote) ? undefined : webUrlProblem(p.remote);
  if (remote !== undefined) throw new Error(`${where}.publishTo.remote ${remote}, or the absolute path of a repository`);
  if (p.username !== undefined && (p.username === '' || p.username.includes(':'))) throw new Error(`${where}.publishTo.username must be a name without ":"`);
  for (const key of ['statusUrl'] as const) {
    const value = p[key];
    const problem = value === undefined ? undefined : webUrlProblem(value);
    if (problem !== undefined) throw new Error(`${where}.publishTo.${key} ${problem}`);
  }
  const forge = p.forge;
  if (forge === undefined) return;
  if (p.token === undefined) throw new Error(`${where}.publishTo.forge needs publishTo.token`);
  const pattern = forge.kind === 'github' ? GITHUB_REPOSITORY : GITLAB_PROJECT;
  if (!pattern.test(forge.repository)) throw new Error(`${where}.publishTo.forge.repository must match ${pattern.source}`);
  const api = forge.apiUrl === undefined ? undefined : webUrlProblem(forge.apiUrl);
  if (api !== undefined) throw new Error(`${where}.publishTo.forge.apiUrl ${api}`);
}

/** The workspaces' publish tokens, for no run to see: by value, and by the variable they are read from; throws, naming it, on one that cannot be read. */
export function publishSecrets(workspaces: Workspace[], env: NodeJS.ProcessEnv): { names: string[]; values: string[] } {
  const names: string[] = [];
  const values: string[] = [];
  for (const ws of workspaces) {
    const token = ws.publishTo?.token;
    if (token === undefined) continue;
    if (typeof token === 'object' && 'env' in token) names.push(token.env);
    values.push(readSecret(token, `workspace "${ws.id}": publishTo.token`, env));
  }
  return { names, values };
}

/** What a spec asks of publishing: a push, and a pull request. */
export function publishAsked(publish: PublishSpec | undefined): { push: boolean; pullRequest: boolean } {
  const push = publish !== undefined && publish.push !== false;
  return { push, pullRequest: push && publish?.pullRequest !== undefined };
}

/** Why a run of `ws` cannot publish as its spec asks (no `publishTo`, no forge, not in a worktree), or undefined. */
export function publishUnavailable(ws: Workspace, spec: { publish?: PublishSpec; isolation?: string }): string | undefined {
  const asked = publishAsked(spec.publish);
  if (!asked.push) return undefined;
  if (ws.publishTo === undefined) return `workspace "${ws.id}" has no publishTo: its operator decides where its runs are pushed`;
  if (asked.pullRequest && ws.publishTo.forge === undefined) return `workspace "${ws.id}" has no publishTo.forge to open a pull request on`;
  if (spec.isolation !== 'worktree') return 'only a run in a worktree ("isolation": "worktree") has a branch to publish';
  return undefined;
}

/** Schedules' and triggers' `run.publish`, checked against their workspace's when the config loads (not first when one fires). */
export function checkOriginsPublish(
  origins: ReadonlyArray<{ where: string; workspace: string; run?: { publish?: PublishSpec; isolation?: string } }>,
  listed: readonly Workspace[],
): void {
  for (const o of origins) {
    const ws = listed.find((w) => w.id === o.workspace);
    if (ws === undefined || o.run?.publish === undefined) continue;
    const why = publishUnavailable(ws, { publish: o.run.publish, isolation: o.run.isolation ?? ws.run?.isolation ?? 'none' });
    if (why !== undefined) throw new Error(`${o.where}: run.publish cannot be: ${why}`);
  }
}
