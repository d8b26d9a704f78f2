import { environmentOperatorWebhook, serviceUrl, type Config } from './config';
import { cacheAgents, type AgentCacheListener } from './db/agent-cache';
import type { Sql } from './db/connect';
import { openDatabase, waitWhileBusy } from './db/database';
import { requestPoolOptions } from './db/pooler';
import { replicaReads } from './db/reads';
import { listenForInbox, type InboxListener } from './db/inbox-signal';
import { buildApp, buildWorkerApp, type App, type WorkerApp } from './app';
import type { Logger } from './log';
import { lossAuditor } from './domain/deliveries/loss-audit';
import { createMetrics } from './metrics';
import { createOAuthServer, type OAuthServer } from './oauth/provider';
import { startWorker, type RunningWorker } from './webhooks/worker';
import { a2aPush } from './a2a/push-body';
import { trackPresence, type Presence } from './domain/agents/presence';
import { syncEnvironmentWebhook } from './domain/people/operator-webhooks';
import { paceHeap } from './heap-pacing';

const HTTP_STOP_GRACE_MS = 3_000;

export type ServiceOptions = {
  // Every part logs here, a wake-up that failed after its commit included.
  log: Logger;
  // The webhook worker in this process: `ams serve` with WORKER=inline, `ams worker`, the bench;
  // tests that do not ring doorbells leave it out.
  worker: boolean;
  // Called if the worker ends without being asked to (webhooks/worker.ts).
  onWorkerFailed?: (error: Error) => void;
};

export type WorkerService = {
  sql: Sql;
  databaseUrl: string;
  worker: RunningWorker | null;
  stop: () => Promise<void>;
  // Listens on HOST and PORT (or the port given); stop() then closes the server in its turn.
  // Answers the port. A worker alone serves only its health and metrics (buildWorkerApp).
  listen: (port?: number) => number;
};

// The HTTP surface, built but not listening until listen() (tests mostly call app.handle()).
export type HttpService = WorkerService & {
  app: App;
  inboxSignal: InboxListener;
  agentCache: AgentCacheListener;
  presence: Presence;
  // The OAuth authorization server, when PUBLIC_URL is set.
  oauth: OAuthServer | null;
};

// The whole service wired once, for `ams serve`, `ams worker` (http: false), the bench's server and
// the tests: the database (migrated), the inbox wait's and the agent cache's listeners, the app and
// the worker, and a stop that takes them down in order.
export async function createService(config: Config, options: ServiceOptions & { http: true }): Promise<HttpService>;
export async function createService(config: Config, options: ServiceOptions & { http: false }): Promise<WorkerService>;
export async function createService(
  config: Config,
  { log, http, worker: withWorker, onWorkerFailed }: ServiceOptions & { http: boolean },
): Promise<HttpService | WorkerService> {
  const db = await openDatabase(config, log);
  // Only a process that serves HTTP has reads that may lag. Opened lazily by postgres.js: a replica
  // that is down at the start only sends its reads to the primary.
  const replica = http && config.DATABASE_REPLICA_URL
    ? replicaReads(
        db.sql,
        config.DATABASE_REPLICA_URL,
        { poolSize: config.DB_POOL_SIZE, connectTimeoutS: config.DB_CONNECT_TIMEOUT_S, options: requestPoolOptions(config) },
        log,
      )
    : null;
  const metrics = createMetrics();
  const auditor = lossAuditor(db.sql, log, {
    intervalMs: config.LOSS_AUDIT_INTERVAL_MS,
    thresholdMs: config.LOSS_AUDIT_AFTER_MS,
    windowMs: config.LOSS_AUDIT_WINDOW_MS,
  });
  const started: {
    inboxSignal?: InboxListener;
    agentCache?: AgentCacheListener;
    presence?: Presence;
    app?: App | WorkerApp;
    oauth?: OAuthServer | null;
    server?: NonNullable<App['server']>;
    worker?: RunningWorker;
    heap?: ReturnType<typeof paceHeap>;
  } = {};
  // Waiting inbox requests answer first, so that stopping need not wait out their wait; then no
  // new requests; then in-flight doorbells finish (or are released); then the pools close.
  const stop = async () => {
    started.heap?.stop();
    auditor.stop();
    await started.inboxSignal?.stop();
    await started.agentCache?.stop();
    const server = started.server;
    if (server) {
      // Requests in flight get a moment to finish; connections still open after it (a dashboard's
      // event stream, which its browser reopens elsewhere, or a client that stalls) are closed.
      await Promise.race([started.app!.stop(), Bun.sleep(HTTP_STOP_GRACE_MS)]);
      await server.stop(true);
    }
    // After the last request: its agent's last-seen time is written, and this instance's rows go.
    await started.presence?.stop();
    await started.worker?.stop();
    await replica?.stop();
    await db.close();
  };
  try {
    if (http) {
      // Each part that needs a connection waits, as the migration did, while PostgreSQL has none
      // to give (database.ts).
      const inboxSignal = (started.inboxSignal = listenForInbox(db.sql, log));
      await waitWhileBusy(log, () => inboxSignal.start());
      const agentCache = (started.agentCache = cacheAgents(db.sql, log));
      await waitWhileBusy(log, () => agentCache.start());
      const presence = (started.presence = trackPresence(db.sql, log));
      const oauth = (started.oauth = await waitWhileBusy(log, () => createOAuthServer(db.sql, config, log)));
      started.app = buildApp({
        sql: db.sql,
        reads: replica ?? undefined,
        replica: replica ? replica.state : undefined,
        config,
        log,
        inboxSignal,
        agentCache,
        metrics,
        auditor,
        waitingInboxRequests: () => inboxSignal.waiting(),
        oauth,
        presence,
      });
    }
    // OPERATOR_WEBHOOK_URL as this start's settings have it (set, changed or gone), before the
    // worker can tell anybody anything; after the parts that open connections of their own, in
    // the order a start opens them (test-faults/start-exhaustion.test.ts counts them).
    await waitWhileBusy(log, () => syncEnvironmentWebhook(db.sql, environmentOperatorWebhook(config)));
    if (withWorker) {
      started.worker = await waitWhileBusy(log, () =>
        startWorker({ sql: db.sql, databaseUrl: db.url, config, log, onFailed: onWorkerFailed, metrics, renderPush: (sent, push) => a2aPush(sent, push, serviceUrl(config)) }),
      );
    }
    // Presence's first beat and the loss audit's first run come last, before the port is served:
    // run during the start, either could hold the query pool's one connection while a step needed
    // it, and the pool opened a second, out of the order a start opens its connections.
    const presence = started.presence;
    if (presence) await waitWhileBusy(log, () => presence.start());
    auditor.start();
    if (!http && started.worker) {
      const worker = started.worker;
      started.app = buildWorkerApp({
        sql: db.sql,
        config,
        log,
        metrics,
        auditor,
        worker: { silentForMs: worker.silentForMs, staleMs: config.WORKER_STALE_MS },
      });
    }
    const inboxSignal = started.inboxSignal;
    metrics.observe({
      sql: db.sql,
      poolSize: config.DB_POOL_SIZE,
      stalledAfterMs: config.STALLED_AFTER_MS,
      slowMs: config.WEBHOOK_SLOW_MS,
      waitingInboxRequests: inboxSignal && (() => inboxSignal.waiting()),
      openEventStreams: inboxSignal && (() => inboxSignal.streaming()),
      listenerConnects: inboxSignal && (() => inboxSignal.connects()),
      lossAudit: () => auditor.latest(),
      replica: replica ?? undefined,
    });
    started.heap = paceHeap();
  } catch (error) {
    // A part that failed to start leaves nothing running behind it: no listener, no open pool.
    await stop().catch(() => {});
    throw error;
  }
  const listen = (port = config.PORT) => {
    const app = started.app;
    if (!app) throw new Error('Nothing to serve: this service was started with neither HTTP nor a worker.');
    app.listen({
      port,
      hostname: config.HOST,
      // Bun's own cap answers a bare 413 without the envelope; ours (web/body.ts) refuses at
      // BODY_LIMIT_BYTES in the envelope, from the declared length or while reading a chunked body.
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    });
    started.server = app.server!;
    return started.server.port!;
  };
  const service = { sql: db.sql, databaseUrl: db.url, worker: started.worker ?? null, stop, listen };
  if (!http) return service;
  return { ...service, app: started.app as App, inboxSignal: started.inboxSignal!, agentCache: started.agentCache!, presence: started.presence!, oauth: started.oauth ?? null };
}
