import { RUN_STATUSES } from '../../contract/records';

/** The caller commands' usage texts (docs/cli.md). */

export const COMMON = `
Common options:
  --url URL      the service (default: $HEADLESS_URL, else the daemon running on this
                 machine's data directory, else http://127.0.0.1:47331)
  --json         print JSON for machines instead of text
  --help, --version
The admin token, when one is needed, is read from HEADLESS_ADMIN_TOKEN.
Exit codes: 0 succeeded (or done), 1 run failed, 2 bad usage, 3 timed out, 4 cancelled,
5 interrupted, 6 the service refused or could not be reached, 7 expired in the queue,
130 stopped waiting (Ctrl-C; the run goes on).`;

export const CALLER_USAGE: Record<string, string> = {
  run: `Usage: headless-run-webhook run "<prompt>" [--workspace ID] [--agent NAME] [--resume ID] [--timeout MS]
                                  [--title TEXT] [--meta KEY=VALUE]... [--schema FILE]
                                  [--worktree [--ref REF] [--push | --pr]] [--verify CMD]... [--rubric TEXT] [--attempts N]
                                  [--secret NAME[=@SECRET]]... [--wait | --follow]

  --workspace ID  the workspace (default: $HEADLESS_WORKSPACE, else "default")
  --agent NAME    the agent (default: the workspace's choice)
  --resume ID     continue this Session (its resumeId)
  --timeout MS    the run's time limit
  --title TEXT    a label shown instead of its id (at most 200 characters)
  --meta K=V      metadata the list can filter by (at most 16)
  --schema FILE   a JSON Schema its answer must match: the answer is its result
  --worktree      run in a git worktree of its own, on its Session's branch
  --ref REF       the ref that worktree is made from (default: the workspace's, else HEAD)
  --push          once it succeeded, push its branch to the workspace's publishTo remote
  --pr            --push, and open a draft pull request (docs/worktrees.md: Publishing)
  --verify CMD    a check the service runs after the agent (exit 0 passes); while one fails,
                  the agent is asked again with its output (docs/verify.md)
  --rubric TEXT   a grader (a read-only run of its own) judges the change against it, once
                  the checks pass (docs/verify.md)
  --attempts N    with --verify or --rubric: attempts at most, the first included (default 3)
  --secret NAME   give the run your variable NAME's value as its variable NAME, never recorded
                  (NAME=@SECRET: the operator's named secret; docs/security.md: Per-run secrets)
  --wait          wait for the end (a live progress line on a terminal)
  --follow        print every event as it comes, then wait for the end`,
  status: 'Usage: headless-run-webhook status <taskId>',
  follow: `Usage: headless-run-webhook follow <taskId> [--after SEQ]

  Prints the run's events (those after SEQ; default all), live until it ends.`,
  logs: `Usage: headless-run-webhook logs <taskId> [--tail BYTES] [--stderr]

  Prints the stored tail of the run's stdout (the last 64 KiB; --tail for fewer bytes);
  --stderr prints its stderr instead.`,
  changes: `Usage: headless-run-webhook changes <taskId>

  Prints the patch of what a run in a worktree changed (--json: its files, commits and patch).`,
  list: `Usage: headless-run-webhook list [--workspace ID] [--status STATUS] [--meta KEY=VALUE] [--limit N] [--cursor C]

  --status STATUS  one of ${RUN_STATUSES.join(', ')}
  --meta K=V       only runs with this metadata
  --limit N        how many, newest first (default 20, at most 500)
  --cursor C       the page after the one that printed "next page: --cursor C"`,
  cancel: 'Usage: headless-run-webhook cancel <taskId> [--wait]',
  message: `Usage: headless-run-webhook message <taskId> "<text>"

  Sends a running run's agent a follow-up: it is given as its next turn, on the same session.`,
  inbox: `Usage: headless-run-webhook inbox [--workspace ID] [--unread] [--limit N] [--cursor C]
       headless-run-webhook inbox show <itemId> [--workspace ID]
       headless-run-webhook inbox read <itemId> [--workspace ID]`,
  approvals: `Usage: headless-run-webhook approvals [taskId] [--workspace ID] [--status STATUS] [--limit N] [--cursor C]

  The questions of runs under permissions "ask", newest first: a run's, a workspace's, or
  (with neither) every pending one.
  --status STATUS  one of pending, allowed, denied, interrupted, abandoned`,
  approve: `Usage: headless-run-webhook approve <approvalId> [--always]

  Allows what the agent asked; --always: and every later question of the same kind in its run.`,
  deny: `Usage: headless-run-webhook deny <approvalId> [--always]

  Refuses what the agent asked; --always: and every later question of the same kind in its run.`,
  sessions: `Usage: headless-run-webhook sessions <resumeId>
       headless-run-webhook sessions retire <resumeId>`,
  schedules: `Usage: headless-run-webhook schedules
       headless-run-webhook schedules run <name>

  Lists the schedules (next occurrence, last run), or starts a run of one now.`,
  triggers: `Usage: headless-run-webhook triggers
       headless-run-webhook triggers deliveries <name> [--limit N] [--cursor C]

  Lists the triggers, or what became of a trigger's deliveries, newest first.`,
  usage: `Usage: headless-run-webhook usage [--days N] [--workspace ID]

  Runs, tokens and spend per UTC day, today first, in total and by workspace, agent, schedule
  and trigger (the estimated part of a cost said apart), then the daily limits in force beside
  what today used of them.
  --days N        how many days, today included (default 7, at most 90)
  --workspace ID  one workspace (default: every listed one)`,
};
