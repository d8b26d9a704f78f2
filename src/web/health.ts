import { Elysia, t } from 'elysia';
import type { Sql } from '../db/connect';
import type { ReplicaState } from '../db/reads';
import { DATABASE_UNAVAILABLE } from '../db/unavailable';
import type { LossAuditor } from '../domain/deliveries/loss-audit';
import { fail, ok } from './envelope';
import { refuseNonOperator } from './operator';

// What a process that only rings doorbells (`ams worker`) reports about itself: how long since its
// heartbeat last reached the database, and how long a silence other workers tolerate before they
// take this one for dead and give its doorbells to someone else.
export type WorkerPulse = { silentForMs: () => number; staleMs: number };

// Answers 200 while this process can do its work (below).
export const HEALTH_PATH = '/health';
// Answers 200 whenever the process is up, from the first moment of a start (web/starting.ts).
export const LIVENESS_PATH = '/health/live';

export type HealthSources = {
  token: string | undefined;
  auditor?: LossAuditor;
  waitingInboxRequests?: () => number;
  worker?: WorkerPulse;
  // Where reads that may lag go (db/reads.ts); absent, or null, without a replica.
  replica?: () => ReplicaState;
};

// A worker whose heartbeat others already take for dead is not doing its job, whatever the database
// answers: its doorbells are being handed to other workers.
const silentWorker = ({ silentForMs, staleMs }: WorkerPulse) => {
  const silent = silentForMs();
  return silent < staleMs
    ? null
    : `The worker's heartbeat has not reached the database for ${Math.floor(silent / 1000)} s; after ${staleMs / 1000} s other workers take over its doorbells.`;
};

// For load balancers and container health checks: GET /health is 200 while this process can do its
// work (the database answers; for a worker, its heartbeat is recent too) and 503 with the reason
// while it cannot. GET /health/live is 200 whenever the process answers at all, for liveness
// probes, which must not restart every process while the database is away. For operators, with the
// operator token: the latest loss audit of this process (null until its first run), and whether
// the replica serves the reads that may lag. A replica that does not answer leaves /health at 200:
// those reads go to the primary.
export const healthRoutes = (sql: Sql, { token, auditor, waitingInboxRequests, worker, replica }: HealthSources) =>
  new Elysia({ name: 'health-routes' })
    .get(
      HEALTH_PATH,
      async ({ set }) => {
        try {
          await sql`select 1`;
        } catch {
          set.status = 503;
          return fail(DATABASE_UNAVAILABLE);
        }
        const silence = worker && silentWorker(worker);
        if (silence) {
          set.status = 503;
          return fail(silence);
        }
        return ok({ status: 'ok' as const });
      },
      { detail: { hide: true }, response: { 200: t.Any(), 503: t.Any() } },
    )
    .get(LIVENESS_PATH, () => ok({ status: 'ok' as const }), { detail: { hide: true } })
    .get(
      '/health/details',
      async ({ request, set }) => {
        const refusal = refuseNonOperator(token, request, set);
        if (refusal) return refusal;
        const database = await sql`select 1`.then(
          () => 'ok' as const,
          () => 'unavailable' as const,
        );
        const lossAudit = auditor?.latest() ?? null;
        if (database !== 'ok') set.status = 503;
        return ok({ database, lossAudit, waitingInboxRequests: waitingInboxRequests?.() ?? 0, replica: replica?.() ?? null });
      },
      { detail: { hide: true } },
    );
