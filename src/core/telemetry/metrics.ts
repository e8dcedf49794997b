import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { ServiceSubscriber } from './observer';

/**
 * The Prometheus metrics of one handler (docs/deployment.md: Metrics), in a registry of its own
 * (several handlers may share a process), served at `GET /metrics` behind the gate.
 */
/** What the metrics read from the store at each scrape. */
export interface MetricSources {
  queued(): Promise<number>;
  /** Today's (UTC) runs and spend of each listed workspace that has daily limits. */
  today(): Promise<Array<{ workspaceId: string; runs: number; spendUsd: number }>>;
}

export function createMetrics(o: MetricSources): { registry: Registry; observer: ServiceSubscriber } {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'headless_' });
  const labels = (names: string[]) => ({ registers: [registry], labelNames: names });
  const started = new Counter({ name: 'headless_runs_started_total', help: 'Runs started on this instance.', ...labels(['agent', 'workspace']) });
  const ended = new Counter({ name: 'headless_runs_ended_total', help: 'Runs ended, by status.', ...labels(['agent', 'workspace', 'status']) });
  const running = new Gauge({ name: 'headless_runs_running', help: 'Runs running on this instance.', registers: [registry] });
  const duration = new Histogram({
    name: 'headless_run_duration_seconds',
    help: 'How long runs took, by agent and status.',
    buckets: [1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800],
    ...labels(['agent', 'status']),
  });
  const tokens = new Counter({ name: 'headless_run_tokens_total', help: 'Tokens the agents reported, by kind.', ...labels(['agent', 'kind']) });
  const cost = new Counter({ name: 'headless_run_cost_usd_total', help: 'Cost the agents reported, in US dollars.', ...labels(['agent']) });
  const deliveries = new Counter({ name: 'headless_webhook_attempts_total', help: 'Webhook attempts, by outcome.', ...labels(['outcome']) });
  const lag = new Histogram({
    name: 'headless_webhook_delivery_lag_seconds',
    help: 'From a run’s end to its run.ended webhook being delivered.',
    buckets: [0.05, 0.1, 0.5, 1, 5, 30, 300, 1800, 7200, 36000],
    registers: [registry],
  });
  const firings = new Counter({ name: 'headless_schedule_firings_total', help: 'Schedule occurrences, by outcome.', ...labels(['schedule', 'outcome']) });
  const triggered = new Counter({ name: 'headless_trigger_deliveries_total', help: 'Trigger deliveries, by outcome.', ...labels(['trigger', 'outcome']) });
  storeGauges(registry, o);
  const mine = new Set<string>();
  const observer: ServiceSubscriber = {
    runStarted(run) {
      mine.add(run.taskId);
      running.set(mine.size);
      started.inc({ agent: run.agent, workspace: run.workspaceId });
    },
    runEnded(run) {
      // A run another instance (or an earlier boot) started ends here only by take-over.
      if (mine.delete(run.taskId)) running.set(mine.size);
      ended.inc({ agent: run.agent, workspace: run.workspaceId, status: run.status });
      if (run.durationMs !== null) duration.observe({ agent: run.agent, status: run.status }, run.durationMs / 1000);
      if (run.usage) {
        tokens.inc({ agent: run.agent, kind: 'input' }, run.usage.inputTokens);
        tokens.inc({ agent: run.agent, kind: 'output' }, run.usage.outputTokens);
        if (run.usage.costUsd !== undefined) cost.inc({ agent: run.agent }, run.usage.costUsd);
      }
    },
    deliveryAttempted(outcome, lagMs) {
      deliveries.inc({ outcome });
      if (lagMs !== undefined) lag.observe(lagMs / 1000);
    },
    scheduleFired(schedule, outcome) {
      firings.inc({ schedule, outcome });
    },
    triggerDelivered(trigger, outcome) {
      triggered.inc({ trigger, outcome });
    },
  };
  return { registry, observer };
}

/** The gauges read from the store at each scrape: every instance's, in a fleet. */
function storeGauges(registry: Registry, o: MetricSources): void {
  new Gauge({
    name: 'headless_runs_queued',
    help: 'Runs waiting in the queue (every instance’s, in a fleet).',
    registers: [registry],
    async collect() {
      this.set(await o.queued());
    },
  });
  const today = (name: string, help: string, value: (d: { runs: number; spendUsd: number }) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['workspace'],
      registers: [registry],
      async collect() {
        this.reset();
        for (const d of await o.today()) this.set({ workspace: d.workspaceId }, value(d));
      },
    });
  today('headless_runs_today', 'Runs accepted today (UTC) in each workspace with daily limits.', (d) => d.runs);
  today('headless_spend_today_usd', 'Spend reported today (UTC) by the runs of each workspace with daily limits.', (d) => d.spendUsd);
}
