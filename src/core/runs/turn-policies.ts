/**
 * @module The turn policies a run's turns are judged by (runs/turn-policy.ts), in the order they
 * are asked: the built-ins, then a handler's own (`turnPolicies`). A new built-in is its file
 * plus its line here.
 */
import { followUpTurn } from './follow-up-turn';
import { repairTurn } from './repair-turn';
import type { TurnPolicy } from './turn-policy';
import { verifyTurn } from './verify-turn';

/**
 * A caller's follow-ups first (their word before the service's); then the answer is repaired, so
 * the checks run on a turn whose answer matches (and it is judged again after each).
 */
const BUILTIN_TURN_POLICIES: readonly TurnPolicy[] = [followUpTurn, repairTurn, verifyTurn];

/** The built-ins, then `extra`; throws, naming it, on a policy without a name or a `decide` (a library caller's typo), or a name taken. */
export function turnPolicies(extra: readonly TurnPolicy[] = []): TurnPolicy[] {
  const all = [...BUILTIN_TURN_POLICIES, ...extra];
  const names = new Set<string>();
  for (const [at, policy] of extra.entries()) {
    if (typeof policy?.name !== 'string' || policy.name === '' || typeof policy.decide !== 'function') {
      throw new Error(`turnPolicies[${at}] must be an object with a name and a decide function`);
    }
  }
  for (const { name } of all) {
    if (names.has(name)) throw new Error(`turnPolicies: the name ${name} is taken`);
    names.add(name);
  }
  return all;
}
