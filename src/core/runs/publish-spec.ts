/**
 * @module The run spec's `publish` across its layers (docs/worktrees.md: Publishing). Layers merge
 * field by field (a start's `title` keeps its trigger's `base`). What a start may ask: what the
 * operator's layers (its workspace's, schedule's, trigger's `run.publish`) ask, or less (no push,
 * no pull request, a draft for a ready one); more only where its workspace's `publishTo.fromStarts`
 * says so, since a push and a pull request reach outside the service.
 */
import type { PublishSpec } from '../../contract/run-spec';
import { publishAsked } from '../worktrees/publish-settings';

/** `top`'s fields over `base`'s; a top that pushes nothing asks no pull request. */
export function mergePublish(base: PublishSpec, top: PublishSpec): PublishSpec {
  if (top.push === false) return { push: false };
  const pullRequest = base.pullRequest && top.pullRequest ? { ...base.pullRequest, ...strip(top.pullRequest) } : (top.pullRequest ?? base.pullRequest);
  return { ...base, ...strip(top), ...(pullRequest ? { pullRequest } : {}) };
}

const strip = <T extends object>(o: T): Partial<T> => Object.fromEntries(Object.entries(o).filter(([, value]) => value !== undefined)) as Partial<T>;

/** Where a start's `publish` (merged over its operator's, `asked`) asks more than its operator's layers (`set`): the field and why, or undefined. */
export function publishLoosened(set: PublishSpec | undefined, asked: PublishSpec | undefined): { field: string; detail: string } | undefined {
  const operator = publishAsked(set);
  const wanted = publishAsked(asked);
  const detail = (what: string) => `${what}; its workspace's publishTo.fromStarts lets a start ask for it`;
  if (wanted.push && !operator.push) return { field: 'publish.push', detail: detail("its workspace's runs push no branch") };
  if (wanted.pullRequest && !operator.pullRequest) return { field: 'publish.pullRequest', detail: detail("its workspace's runs open no pull request") };
  const draft = (p: PublishSpec | undefined) => p?.pullRequest?.draft ?? true;
  if (wanted.pullRequest && !draft(asked) && draft(set))
    return { field: 'publish.pullRequest.draft', detail: detail("its workspace's pull requests are drafts") };
  return undefined;
}
