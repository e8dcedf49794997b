import { expect, it } from 'vitest';
import { realAgentSuite } from '../helpers/real-agent-suite';
import { INDEPENDENT, realTier, run, tier } from '../helpers/real-tier';

/** The real-CLI tier (test/helpers/real-agent-suite.ts) for the independent agents. */
realTier();
realAgentSuite(INDEPENDENT);

it('cline: a one-word prompt, one naming its subcommand, or one that looks like its option is its prompt, sent to the model', async () => {
  for (const prompt of ['auth', '--help']) {
    const before = tier.mock.requests.length;
    expect(await run('ok', { agent: 'cline', prompt, wait: true })).toMatchObject({
      status: 'succeeded',
      lastMessage: expect.stringMatching(/^MOCK REPLY \d+$/),
    });
    // As the user's message, whole (cline trims the newline the adapter adds).
    expect(tier.mock.requests.slice(before).map((r) => (r.body as { messages?: Array<{ content: unknown }> }).messages?.at(-1)?.content)).toContain(prompt);
  }
});
