import { governSends, sendRules } from './domain/messages/send-rules';
import { Elysia } from 'elysia';
import { searchBounds, type Config } from './config';
import { searchGate } from './domain/shared/search-gate';
import type { AgentCache } from './db/agent-cache';
import { onPrimary, type Reads, type Sql } from './db/connect';
import type { ReplicaState } from './db/reads';
import type { InboxSignal } from './db/inbox-signal';
import { dashboard } from './dashboard/dashboard';
import type { Logger } from './log';
import { mcpRoutes } from './mcp/routes';
import { consentRoutes } from './oauth/consent';
import type { OAuthServer } from './oauth/provider';
import { authorizationServer } from './oauth/routes';
import { bodyLimit } from './web/body';
import { deliveryRoutes } from './http/deliveries';
import { errorHandling } from './web/errors';
import type { LossAuditor } from './domain/deliveries/loss-audit';
import { createMetrics, type Metrics } from './metrics';
import { healthRoutes, type WorkerPulse } from './web/health';
import { heldRequests } from './web/held-requests';
import { metricsRoutes } from './web/metrics';
import { nulGuard } from './web/nul-guard';
import { requestIds } from './web/request-id';
import { apiDocs } from './http/openapi';
import { welcomePage } from './http/welcome-page';
import { receiptRoutes } from './http/receipts';
import { searchRoutes } from './http/search';
import { eventRoutes } from './http/events';
import { threadRoutes } from './http/threads';
import { fileRoutes, FILES_PATH } from './http/files';
import { fileRules, governFiles } from './domain/files/file-rules';
import { agentRoutes } from './http/agents';
import { a2aRoutes } from './a2a/routes';
import { trackPresence, type Presence } from './domain/agents/presence';
import { presenceSeen } from './web/presence-seen';

export type AppDeps = {
  sql: Sql;
  // Where reads that may lag run (db/reads.ts): the replica's, or by default the primary's pool.
  reads?: Reads;
  replica?: () => ReplicaState;
  config: Config;
  log: Logger;
  inboxSignal: InboxSignal;
  agentCache: AgentCache;
  metrics?: Metrics;
  auditor?: LossAuditor;
  waitingInboxRequests?: () => number;
  // The OAuth authorization server for MCP clients, when PUBLIC_URL is set (src/oauth).
  oauth?: OAuthServer | null;
  // Who is online and last seen (domain/agents/presence.ts); unstarted, it only keeps memory; null,
  // not tracked at all (the bench's baseline, bench/presence.ts).
  presence?: Presence | null;
};

// The whole HTTP surface, not listening: tests drive it with app.handle(), main.ts serves it.
export function buildApp({ sql, reads = onPrimary(sql), replica, config, log, inboxSignal, agentCache, metrics = createMetrics(), auditor, waitingInboxRequests, oauth = null, presence = trackPresence(sql, log) }: AppDeps) {
  // One per process: the bound on searches holds across every door that searches.
  const searches = searchGate(reads, searchBounds(config));
  // One count for the process, whichever door a request is held open through.
  const held = heldRequests(config.HELD_REQUESTS_PER_AGENT, presence ?? undefined);
  governSends(sql, sendRules(config), metrics.sendWatcher);
  governFiles(sql, fileRules(config));
  return new Elysia()
    .use(requestIds())
    .use(metricsRoutes(metrics, config.METRICS_TOKEN))
    .use(errorHandling(log))
    .use(presence ? presenceSeen(presence) : new Elysia())
    .use(bodyLimit(config.BODY_LIMIT_BYTES, [FILES_PATH]))
    .use(nulGuard())
    .use(authorizationServer(sql, config, oauth))
    .use(apiDocs(config.PUBLIC_URL))
    .use(welcomePage())
    .use(healthRoutes(sql, { token: config.METRICS_TOKEN, auditor, waitingInboxRequests, replica }))
    .use(deliveryRoutes(sql, inboxSignal, agentCache, held, log))
    .use(threadRoutes(sql, agentCache, log, config))
    .use(fileRoutes(sql, agentCache))
    .use(agentRoutes(sql, agentCache, log, searches))
    .use(searchRoutes(sql, agentCache, searches))
    .use(receiptRoutes(sql, inboxSignal, agentCache, held, log, config))
    .use(eventRoutes(sql, inboxSignal, agentCache, held, log, config))
    .use(mcpRoutes(sql, inboxSignal, agentCache, held, log, config, oauth, searches, metrics))
    .use(a2aRoutes(sql, inboxSignal, agentCache, held, log, config))
    .use(consentRoutes(sql, config, log, oauth))
    .use(dashboard({ sql, reads, config, log, metrics, searches, agentCache }));
}

export type App = ReturnType<typeof buildApp>;

export type WorkerAppDeps = Pick<AppDeps, 'sql' | 'config' | 'log' | 'metrics' | 'auditor'> & { worker: WorkerPulse };

// What a process that only rings doorbells (`ams worker`) serves: its health, for container and
// orchestrator probes, and its metrics (doorbell attempts are counted where they are made).
export function buildWorkerApp({ sql, config, log, metrics = createMetrics(), auditor, worker }: WorkerAppDeps) {
  return new Elysia()
    .use(requestIds())
    .use(metricsRoutes(metrics, config.METRICS_TOKEN))
    .use(errorHandling(log))
    .use(healthRoutes(sql, { token: config.METRICS_TOKEN, auditor, worker }));
}

export type WorkerApp = ReturnType<typeof buildWorkerApp>;
