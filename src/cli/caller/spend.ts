import type { UsageReport } from '../../client/index';
import { type Command, EXIT, positiveInt, print, printJson, usage } from './shared';

/** The caller command `usage`: runs, tokens and spend per UTC day, with the daily limits (docs/cli.md). */

type Figures = UsageReport['days'][number]['total'];
type Limits = { runsPerDay?: number; spendPerDayUsd?: number };

/** Dollars to the cent, or to a hundredth of one below a cent. */
const usd = (n: number) => `$${n > 0 && n < 0.01 ? n.toFixed(4) : n.toFixed(2)}`;
const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;

/** One line of figures; the estimated part of the cost said apart. */
const figures = (f: Figures) =>
  `${plural(f.runs, 'run')}  ${f.inputTokens} in / ${f.outputTokens} out tokens  ${usd(f.costUsd)}${f.estimatedCostUsd > 0 ? ` (${usd(f.estimatedCostUsd)} of it estimated)` : ''}`;

const limitText = (l: Limits) =>
  [l.runsPerDay === undefined ? '' : `${plural(l.runsPerDay, 'run')} a day`, l.spendPerDayUsd === undefined ? '' : `${usd(l.spendPerDayUsd)} a day`]
    .filter(Boolean)
    .join(', ') || 'no daily limit';

function printDays(report: UsageReport): void {
  for (const d of report.days) {
    if (d.total.runs === 0) {
      print(`${d.day}  no runs`);
      continue;
    }
    print(`${d.day}  ${figures(d.total)}`);
    for (const [kind, of] of [
      ['workspace', d.workspaces],
      ['agent', d.agents],
      ['schedule', d.schedules],
      ['trigger', d.triggers],
    ] as const)
      for (const [name, f] of Object.entries(of)) print(`  ${kind} ${name}  ${figures(f)}`);
  }
}

/** Each limit in force, beside what today used of it (the first day is today, UTC). */
function printLimits(report: UsageReport): void {
  const today = report.days[0];
  const used = (f: Figures | undefined) => `today ${plural(f?.runs ?? 0, 'run')}, ${usd(f?.costUsd ?? 0)}`;
  print('daily limits (UTC):');
  for (const [id, l] of Object.entries(report.limits.workspaces)) print(`  workspace ${id}  ${limitText(l)}  ${used(today?.workspaces[id])}`);
  for (const [name, l] of Object.entries(report.limits.schedules)) print(`  schedule ${name}  ${limitText(l)}  ${used(today?.schedules[name])}`);
  for (const [name, l] of Object.entries(report.limits.triggers)) print(`  trigger ${name}  ${limitText(l)}  ${used(today?.triggers[name])}`);
}

export const spend: Command = async (client, args, v) => {
  if (args.length > 0) usage('usage', `unexpected argument "${args[0]}"`);
  const days = positiveInt('usage', 'days', v.days, 7);
  if (days > 90) usage('usage', '--days must be at most 90');
  const report = await client.usage({ days, ...(v.workspace === undefined ? {} : { workspaceId: v.workspace }) });
  if (v.json) printJson(report);
  else {
    printDays(report);
    printLimits(report);
  }
  return EXIT.succeeded;
};
