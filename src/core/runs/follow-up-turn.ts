/**
 * @module Follow-ups (docs/http-api.md: Follow-ups), a turn policy (runs/turn-policy.ts): what
 * callers sent a running run while its agent's turn ran is its next turn's prompt, on the same
 * Session (over ACP, the live one). Asked first: the caller's word comes before the service's own
 * repair and checks, which follow that turn.
 */
import type { TurnPolicy } from './turn-policy';

export const followUpTurn: TurnPolicy = {
  name: 'follow-up',
  decide(context) {
    if (!context.canContinue) return undefined;
    const messages = context.takeFollowUps();
    if (messages.length === 0) return undefined;
    for (const m of messages) context.event('follow-up', { id: m.id, state: 'delivered', chars: m.text.length });
    const said = messages.map((m) => m.text).join('\n\n');
    const prompt = messages.length === 1 ? said : `Messages from the caller, sent while you worked, in order:\n\n${said}`;
    return { next: { prompt, reason: `${messages.length} follow-up message${messages.length === 1 ? '' : 's'} from the caller` } };
  },
};
