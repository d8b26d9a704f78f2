import { Elysia, t } from 'elysia';
import type { Sql } from '../db/connect';
import { DATABASE_UNAVAILABLE } from '../db/unavailable';
import { fail, ok } from './envelope';

// For load balancers: 200 while the database answers, 503 while it does not.
export const healthRoutes = (sql: Sql) =>
  new Elysia({ name: 'health-routes' }).get(
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
  );
