import { type Command, EXIT, print, printJson, usage } from './shared';

/** The caller command about schedules: list them, or run one now. */
export const schedules: Command = async (client, args, v) => {
  if (args[0] === 'run') {
    const [, name] = args;
    if (args.length !== 2 || name === undefined) return usage('schedules', 'give one schedule name');
    const started = await client.schedules.run(name);
    if (v.json) printJson(started);
    else
      print(
        `${started.status === 'queued' ? `queued ${started.taskId} at place ${started.queuePosition ?? '?'}` : `started ${started.taskId}`} (session ${started.resumeId})`,
      );
    return EXIT.succeeded;
  }
  if (args.length > 0) usage('schedules', `unknown schedules command "${args[0]}"`);
  const { schedules: list } = await client.schedules.list();
  if (v.json) printJson(list);
  else
    for (const s of list) {
      const last = s.lastRun ? `last ${s.lastRun.taskId} ${s.lastRun.status}` : 'never run';
      print(`${s.name}  ${s.cron} (${s.timezone})  workspace ${s.workspaceId}  next ${s.nextRunAt ?? '—'}  ${last}`);
    }
  return EXIT.succeeded;
};
