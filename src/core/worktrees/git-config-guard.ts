/**
 * @module Which keys of a repository's configuration make git run a program, and what the
 * service's own commands set them to instead (docs/worktrees.md: What the service's git trusts).
 * The agent may write that configuration (a workspace that is the repository's own folder); the
 * service's git must obey none of it.
 */

/** Keys (by their last part) that name a program: drivers, helpers, editors, pagers, ssh, signing, hooks. */
const COMMAND_SUFFIXES = [
  '.cmd',
  '.command',
  '.program',
  '.helper',
  '.driver',
  '.textconv',
  '.editor',
  '.sshcommand',
  '.askpass',
  '.gitproxy',
  '.fsmonitor',
  '.pager',
  '.external',
  '.alternaterefscommand',
  '.packobjectshook',
  '.receivepack',
  '.uploadpack',
  '.defaultkeycommand',
];

/** The Git LFS filters as `git lfs install` writes them: kept where git-lfs is installed, pinned to exactly these. */
const LFS_FILTER: Record<string, string> = {
  'filter.lfs.clean': 'git-lfs clean -- %f',
  'filter.lfs.smudge': 'git-lfs smudge -- %f',
  'filter.lfs.process': 'git-lfs filter-process',
};

/** A filter driver's keys, each made harmless: no program, and a content that stays as it is is not an error. */
function filterOverrides(name: string, lfs: boolean): Array<[string, string]> {
  const keep = name === 'lfs' && lfs;
  const keys = ['clean', 'smudge', 'process'].map((part): [string, string] => {
    const key = `filter.${name}.${part}`;
    return [key, keep ? (LFS_FILTER[key] ?? '') : ''];
  });
  return [...keys, [`filter.${name}.required`, 'false']];
}

/** The middle part of a three-part key (`filter.<name>.clean`), or undefined. */
function subsection(key: string, section: string): string | undefined {
  if (!key.startsWith(`${section}.`)) return undefined;
  const rest = key.slice(section.length + 1);
  const dot = rest.lastIndexOf('.');
  return dot < 0 ? undefined : rest.slice(0, dot);
}

/**
 * What each listed key (`git config --list --name-only`, includes followed) is set to on the
 * service's commands: a key that names a program is emptied, a filter driver switched off (Git
 * LFS pinned to git-lfs where it is installed), a submodule's `update = !command` made a checkout.
 */
export function commandKeyOverrides(keys: string[], lfs: boolean): Array<[string, string]> {
  const overrides = new Map<string, string>();
  // LFS always: `git lfs install` writes its filters to the user's configuration, which is not read.
  const filters = new Set<string>(['lfs']);
  for (const key of keys) {
    if (key === '') continue;
    const lower = key.toLowerCase();
    const filter = subsection(key, 'filter');
    if (filter !== undefined) filters.add(filter);
    else if (subsection(key, 'submodule') !== undefined && lower.endsWith('.update')) overrides.set(key, 'checkout');
    else if (lower.startsWith('pager.') || lower.startsWith('hook.') || COMMAND_SUFFIXES.some((suffix) => lower.endsWith(suffix))) overrides.set(key, '');
  }
  for (const name of filters) for (const [key, value] of filterOverrides(name, lfs)) overrides.set(key, value);
  return [...overrides];
}
