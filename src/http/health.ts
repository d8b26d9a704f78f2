import { Elysia, t } from 'elysia';
import type { Sql } from '../db/connect';
import { DATABASE_UNAVAILABLE } from '../db/unavailable';
import type { LossAuditor } from '../domain/deliveries/loss-audit';
import { fail, ok } from '../web/envelope';
import { refuseNonOperator } from '../web/operator';

export type HealthSources = { token: string | undefined; auditor?: LossAuditor; waitingInboxRequests?: () => number };

// For load balancers: 200 while the database answers, 503 while it does not. For operators, with
// the operator token: the same, and the latest loss audit of this process (null until its first run).
export const healthRoutes = (sql: Sql, { token, auditor, waitingInboxRequests }: HealthSources) =>
  new Elysia({ name: 'health-routes' })
    .get(
      '/health',
      async ({ set }) => {
        try {
          await sql`select 1`;
          return ok({ status: 'ok' as const });
        } catch {
          set.status = 503;
          return fail(DATABASE_UNAVAILABLE);
        }
      },
      { detail: { hide: true }, response: { 200: t.Any(), 503: t.Any() } },
    )
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
        return ok({ database, lossAudit, waitingInboxRequests: waitingInboxRequests?.() ?? 0 });
      },
      { detail: { hide: true } },
    );
