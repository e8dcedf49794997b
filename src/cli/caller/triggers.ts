import { type Command, EXIT, print, printJson, usage } from './shared';

/** The caller command about triggers: list them, or one's deliveries. */
export const triggers: Command = async (client, args, v) => {
  if (args[0] === 'deliveries') {
    const [, name] = args;
    if (args.length !== 2 || name === undefined) return usage('triggers', 'give one trigger name');
    const page = await client.triggers.deliveries(name, {
      ...(v.limit === undefined ? {} : { limit: Number(v.limit) }),
      ...(v.cursor ? { cursor: v.cursor } : {}),
    });
    if (v.json) printJson(page);
    else {
      for (const d of page.deliveries)
        print(`${d.receivedAt}  ${d.id}  ${d.outcome}${d.event ? `  ${d.event}` : ''}${d.taskId ? `  ${d.taskId}` : ''}${d.reason ? `  (${d.reason})` : ''}`);
      if (page.nextCursor) print(`next page: --cursor ${page.nextCursor}`);
    }
    return EXIT.succeeded;
  }
  if (args.length > 0) usage('triggers', `unknown triggers command "${args[0]}"`);
  const { triggers: list } = await client.triggers.list();
  if (v.json) printJson(list);
  else for (const t of list) print(`${t.name}  ${t.sender} (${t.verify})  workspace ${t.workspace}${t.enabled ? '' : '  disabled'}`);
  return EXIT.succeeded;
};
