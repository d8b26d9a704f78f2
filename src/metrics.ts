import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Sql } from './db/connect';
import type { ReplicaReads } from './db/reads';
import { owedJobs } from './db/job-queue';
import { countDeliveries } from './domain/deliveries/delivery-counts';
import type { LossAudit } from './domain/deliveries/loss-audit';
import { NOTIFY_TASK } from './domain/deliveries/notify-jobs';
import { countEndpoints } from './domain/agents/endpoint-health';
import { holdFigures } from './domain/messages/holds';
import { agentsOnline } from './domain/agents/presence';
import { countOperatorWebhooks } from './domain/people/operator-webhooks';
import { OPERATOR_EVENTS, type NoticeOutcome, type OperatorEvent } from './domain/people/operator-notices';

// What one process knows about itself and the database, in the Prometheus text format (GET
// /metrics). Counters and histograms are this process's; gauges read from the database describe
// the whole service, whichever instance is scraped.
export type MetricsSources = {
  sql: Sql;
  poolSize: number;
  stalledAfterMs: number;
  // WEBHOOK_SLOW_MS: an endpoint whose recent p95 is above it counts as slow.
  slowMs: number;
  // Present where this process serves HTTP.
  waitingInboxRequests?: () => number;
  openEventStreams?: () => number;
  listenerConnects?: () => number;
  lossAudit?: () => LossAudit | null;
  // Present where DATABASE_REPLICA_URL is set (db/reads.ts).
  replica?: Pick<ReplicaReads, 'state' | 'served'>;
};

export type DoorbellOutcome = 'notified' | 'retry' | 'failed';

const HOLD_DECISIONS = ['approved', 'rejected', 'expired'] as const;
export type HoldDecision = (typeof HOLD_DECISIONS)[number];
const ENDPOINT_TRANSITIONS = ['warned', 'disabled', 'enabled', 'paused', 'resumed'] as const;
export type EndpointTransition = (typeof ENDPOINT_TRANSITIONS)[number];

const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'ams_' });
  // On Bun the heap-space figures walk every object of the heap (JavaScriptCore has no V8 heap
  // spaces to read): 65 ms a scrape at a million objects, which ten thousand open streams make,
  // with every request held meanwhile. The heap's size and use (nodejs_heap_size_*) cost nothing.
  for (const figure of ['total', 'used', 'available']) registry.removeSingleMetric(`ams_nodejs_heap_space_size_${figure}_bytes`);
  const http = new Histogram({
    name: 'ams_http_request_duration_seconds',
    help: 'HTTP requests by method, route template and status, with their duration.',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: SECONDS,
    registers: [registry],
  });
  const doorbells = new Histogram({
    name: 'ams_doorbell_attempt_duration_seconds',
    help: 'Doorbell attempts by outcome (notified, retry scheduled, failed) and answer class, with their duration.',
    labelNames: ['outcome', 'answer'] as const,
    buckets: SECONDS,
    registers: [registry],
  });
  const scrapeFailures = new Counter({
    name: 'ams_metrics_database_read_failures_total',
    help: 'Scrapes whose database figures could not be read (the database was away); those gauges keep their last value.',
    registers: [registry],
  });
  const endpointTransitions = new Counter({
    name: 'ams_webhook_endpoint_transitions_total',
    help: 'Webhooks that reached a warning stage (warned), were switched off for failing (disabled), switched back on by a person (enabled), or paused and resumed by a person (paused, resumed), as seen by this process.',
    labelNames: ['transition'] as const,
    registers: [registry],
  });
  for (const transition of ENDPOINT_TRANSITIONS) endpointTransitions.inc({ transition }, 0);
  const quotaRefusals = new Counter({
    name: 'ams_quota_refusals_total',
    help: "Sends refused because the agent's quota was used up: messages (per minute) or threads (per hour), as seen by this process.",
    labelNames: ['quota'] as const,
    registers: [registry],
  });
  for (const quota of ['messages', 'threads']) quotaRefusals.inc({ quota }, 0);
  const loopsBroken = new Counter({
    name: 'ams_loops_broken_total',
    help: 'Threads the loop breaker paused, as seen by this process.',
    registers: [registry],
  });
  const holdDecisions = new Counter({
    name: 'ams_hold_decisions_total',
    help: 'Held messages decided: approved or rejected by a person on the dashboard, or rejected on expiry by this process\'s sweep.',
    labelNames: ['decision'] as const,
    registers: [registry],
  });
  for (const decision of HOLD_DECISIONS) holdDecisions.inc({ decision }, 0);
  const operatorNotices = new Counter({
    name: 'ams_operator_notices_total',
    help: 'Attempts at operator notices by event and outcome: delivered (answered 2xx), retrying (failed, another attempt queued) or gave_up (failed, none left), as seen by this process.',
    labelNames: ['event', 'outcome'] as const,
    registers: [registry],
  });
  for (const event of OPERATOR_EVENTS) for (const outcome of ['delivered', 'retrying', 'gave_up']) operatorNotices.inc({ event, outcome }, 0);
  const mcpRequests = new Counter({
    name: 'ams_mcp_requests_total',
    help: 'MCP requests (JSON-RPC messages POSTed to /mcp) by the protocol version they were answered in and their method, as seen by this process.',
    labelNames: ['protocol_version', 'method'] as const,
    registers: [registry],
  });
  let sources: MetricsSources | undefined;

  const fromDatabase = async () => {
    if (!sources) return null;
    const { sql, stalledAfterMs, slowMs } = sources;
    try {
      const [counts, jobs, connections, endpoints, holds, operatorWebhooks, online] = await Promise.all([
        countDeliveries(sql, stalledAfterMs),
        owedJobs(sql, NOTIFY_TASK),
        sql<{ state: string; n: number }[]>`
          select coalesce(state, 'unknown') as state, count(*)::int as n from pg_stat_activity
          where datname = current_database() and application_name = current_setting('application_name')
          group by 1`,
        countEndpoints(sql, { slowMs, stalledAfterMs }),
        holdFigures(sql),
        countOperatorWebhooks(sql),
        agentsOnline(sql),
      ]);
      return { counts, jobs, connections, endpoints, holds, operatorWebhooks, online };
    } catch {
      scrapeFailures.inc();
      return null;
    }
  };
  // One database read per scrape, shared by every gauge that needs it.
  let reading: Promise<Awaited<ReturnType<typeof fromDatabase>>> | null = null;
  const read = () => (reading ??= fromDatabase().finally(() => queueMicrotask(() => (reading = null))));

  new Gauge({
    name: 'ams_deliveries',
    help: 'Deliveries at each step (accepted, notified, delivered, fetched, failed), across the service.',
    labelNames: ['step'] as const,
    registers: [registry],
    async collect() {
      const figures = await read();
      if (figures) for (const [step, n] of Object.entries(figures.counts.byStep)) this.set({ step }, n);
    },
  });
  new Gauge({
    name: 'ams_webhook_endpoints',
    help: "Agents' webhooks by health: healthy (the last attempt answered 2xx), slow (p95 of its last 100 attempts above WEBHOOK_SLOW_MS), not-reporting (deliveries stalled), failing (no 2xx since a failure), disabled (switched off for failing), untried.",
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      const figures = await read();
      if (figures) for (const [state, n] of Object.entries(figures.endpoints)) this.set({ state }, n);
    },
  });
  new Gauge({
    name: 'ams_operator_webhooks',
    help: 'Operator webhooks by health: healthy (the last attempt answered 2xx), failing (no 2xx since a failed attempt), untried.',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      const figures = await read();
      if (figures) for (const [state, n] of Object.entries(figures.operatorWebhooks)) this.set({ state }, n);
    },
  });
  // A gauge of one figure from the shared database read, kept at its last value when the read fails.
  const databaseFigure = (name: string, help: string, pick: (figures: NonNullable<Awaited<ReturnType<typeof read>>>) => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        const figures = await read();
        if (figures) this.set(pick(figures));
      },
    });
  databaseFigure('ams_deliveries_stalled', 'Deliveries notified but not reported delivered within STALLED_AFTER_MS.', (f) => f.counts.stalled);
  databaseFigure(
    'ams_deliveries_retrying',
    'Deliveries at Accepted whose last doorbell attempt failed and whose next one is scheduled.',
    (f) => f.counts.retrying,
  );
  databaseFigure('ams_doorbell_jobs_owed', 'Doorbell jobs still to run: queued, scheduled for a retry, parked or running.', (f) => f.jobs.owed);
  databaseFigure(
    'ams_doorbell_oldest_due_seconds',
    'How long the oldest doorbell job that is due has waited to run (0 when none is due).',
    (f) => f.jobs.oldestDueSeconds,
  );
  databaseFigure('ams_holds_waiting', 'Messages waiting for a person\'s approval.', (f) => f.holds.waiting);
  databaseFigure(
    'ams_holds_oldest_age_seconds',
    'How long the oldest message waiting for a person\'s approval has waited (0 when none waits).',
    (f) => f.holds.oldestAgeSeconds,
  );
  databaseFigure('ams_agents_online', 'Agents holding an event stream, an MCP stream or a wait open on some instance of the service.', (f) => f.online);
  databaseFigure('ams_threads_paused', 'Threads the loop breaker paused that no person has resumed yet.', (f) => f.holds.pausedThreads);
  new Gauge({
    name: 'ams_database_connections',
    help: 'Connections the service holds on its database, all instances together, by state (active, idle, …).',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      const figures = await read();
      if (!figures) return;
      this.reset();
      for (const { state, n } of figures.connections) this.set({ state }, n);
    },
  });
  new Gauge({
    name: 'ams_database_pool_size',
    help: "The most connections this process's pool opens (DB_POOL_SIZE).",
    registers: [registry],
    collect() {
      if (sources) this.set(sources.poolSize);
    },
  });
  new Gauge({
    name: 'ams_inbox_waiting_requests',
    help: 'Inbox requests (HTTP and MCP) held open by this process, waiting for mail.',
    registers: [registry],
    collect() {
      this.set(sources?.waitingInboxRequests?.() ?? 0);
    },
  });
  new Gauge({
    name: 'ams_event_streams_open',
    help: 'Streams held open for agents by this process: event streams (GET /api/events) and MCP GET streams.',
    registers: [registry],
    collect() {
      this.set(sources?.openEventStreams?.() ?? 0);
    },
  });
  new Gauge({
    name: 'ams_inbox_listener_connects',
    help: "Times this process's LISTEN connection for inbox wake-ups was established; above 1 means it reconnected.",
    registers: [registry],
    collect() {
      this.set(sources?.listenerConnects?.() ?? 0);
    },
  });
  new Gauge({
    name: 'ams_loss_audit_drift',
    help: "The latest loss audit's counts, each of which should be 0: messages without deliveries, owed doorbells without a job, owed doorbells overdue.",
    labelNames: ['check'] as const,
    registers: [registry],
    collect() {
      const audit = sources?.lossAudit?.();
      if (!audit) return;
      this.set({ check: 'messages_without_deliveries' }, audit.messagesWithoutDeliveries);
      this.set({ check: 'doorbells_without_job' }, audit.doorbellsWithoutJob);
      this.set({ check: 'doorbells_overdue' }, audit.doorbellsOverdue);
    },
  });

  // Only where DATABASE_REPLICA_URL is set: without a replica there is nothing to say, and a 0 would
  // read as one that does not answer.
  const observeReplica = (replica: Pick<ReplicaReads, 'state' | 'served'>) => {
    new Gauge({
      name: 'ams_database_replica_serving',
      help: 'With DATABASE_REPLICA_URL: 1 while reads that may lag (dashboard lists and overview, search, the directory) go to the replica, 0 while it does not answer and they go to the primary.',
      registers: [registry],
      collect() {
        this.set(replica.state()?.serving ? 1 : 0);
      },
    });
    new Counter({
      name: 'ams_lagging_reads_total',
      help: 'Reads that may lag served by this process, by where they ran: on the replica, or on the primary while the replica did not answer (with DATABASE_REPLICA_URL).',
      labelNames: ['on'] as const,
      registers: [registry],
      collect() {
        const served = replica.served();
        this.reset();
        this.inc({ on: 'replica' }, served.replica);
        this.inc({ on: 'primary' }, served.primary);
      },
    });
  };

  return {
    registry,
    // The gauges read from here once the service's parts exist.
    observe(from: MetricsSources) {
      sources = from;
      if (from.replica) observeReplica(from.replica);
    },
    httpRequest(method: string, route: string, status: number, seconds: number) {
      http.observe({ method, route, status: String(status) }, seconds);
    },
    doorbellAttempt(outcome: DoorbellOutcome, status: number | null, seconds: number) {
      doorbells.observe({ outcome, answer: status === null ? 'none' : `${Math.floor(status / 100)}xx` }, seconds);
    },
    endpointTransition(transition: EndpointTransition) {
      endpointTransitions.inc({ transition });
    },
    // Labels bounded by the caller (mcp/protocol-version.ts): known versions and methods only.
    mcpRequest(protocolVersion: string, method: string) {
      mcpRequests.inc({ protocol_version: protocolVersion, method });
    },
    operatorNotice(event: OperatorEvent, outcome: NoticeOutcome) {
      operatorNotices.inc({ event, outcome });
    },
    // What the send rules did (domain/messages/send-rules.ts).
    sendWatcher: {
      overQuota: (kind: 'message' | 'thread') => quotaRefusals.inc({ quota: kind === 'message' ? 'messages' : 'threads' }),
      loopBroken: () => loopsBroken.inc(),
    },
    // Counted where each decision is made: the dashboard's routes and the expiry sweep.
    holdDecisions(decided: Partial<Record<HoldDecision, number>>) {
      for (const decision of HOLD_DECISIONS) if (decided[decision]) holdDecisions.inc({ decision }, decided[decision]);
    },
    render: () => registry.metrics(),
    contentType: registry.contentType,
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
