import type { WorkspaceReport } from '../agents/doctor';
import type { RunEvents } from '../events/run-events';
import type { IdempotencyKeys } from '../idempotency';
import type { Inbox } from '../inbox';
import type { Approvals } from '../approvals/approvals';
import type { RunService } from '../runs/run-service';
import type { Scheduler } from '../schedules/scheduler';
import type { SessionBook } from '../sessions';
import type { TriggerService } from '../triggers/trigger-service';
import type { Workspace } from '../types';

/** What a route's handler works with. */
export interface RouteServices {
  runs: RunService;
  events: RunEvents;
  /** How often an idle event stream sends a keep-alive. */
  heartbeatMs: number;
  sessions: SessionBook;
  inbox: Inbox;
  /** The questions of runs under `permissions: "ask"` (docs/approvals.md). */
  approvals: Approvals;
  /** The workspace of a path or query id, to read its runs, Inbox or usage; 404 workspace_not_found if there is none here or in the fleet. */
  workspace(id: string): Promise<Workspace>;
  /** The workspace a start targets: as `workspace`, and in a fleet one whose runs some living member can take now. */
  workspaceToStart(id: string): Promise<Workspace>;
  idempotency: IdempotencyKeys;
  schedules: Scheduler;
  triggers: TriggerService;
  /** The listed workspaces (none when they come from a resolver). */
  workspaces(): Array<Pick<Workspace, 'id' | 'tag'>>;
  /** The Prometheus metrics, in the text format. */
  metrics(): Promise<{ contentType: string; body: string }>;
  /** Why the service is not ready (the store does not answer, the fleet lease is lost); undefined when it is. */
  unready(): Promise<string | undefined>;
  /** The agent checks of one workspace, or of every listed one. */
  diagnose(workspaceId: string | undefined): Promise<WorkspaceReport[]>;
}
