import { Elysia } from 'elysia';
import type { Metrics } from '../metrics';
import { refuseNonOperator } from './operator';

const started = new WeakMap<Request, { since: number; metrics: Metrics }>();

// The route of a refusal given before routing, for which no template is known yet.
export const BEFORE_ROUTING = 'before_routing';

// Elysia runs no afterResponse hook for an answer returned by an onRequest hook (a refusal before
// routing, the OAuth endpoints), so such a hook counts its answer here, with its route template.
export function countEarlyAnswer(request: Request, route: string, status: number) {
  const start = started.get(request);
  if (start) start.metrics.httpRequest(request.method, route, status, (performance.now() - start.since) / 1000);
}

// Every request timed by method, route template (never the raw path: ids would make a series per
// thread) and status; and GET /metrics for a scraper holding the operator token.
export const metricsRoutes = (metrics: Metrics, token: string | undefined) =>
  new Elysia({ name: 'metrics' })
    .onRequest(({ request }) => {
      started.set(request, { since: performance.now(), metrics });
    })
    .onAfterResponse({ as: 'global' }, ({ request, route, set, responseValue }) => {
      const start = started.get(request);
      if (start === undefined) return;
      const status = responseValue instanceof Response ? responseValue.status : Number(set.status ?? 200);
      metrics.httpRequest(request.method, route || 'unmatched', status, (performance.now() - start.since) / 1000);
    })
    .get(
      '/metrics',
      async ({ request, set }) => {
        const refusal = refuseNonOperator(token, request, set);
        if (refusal) return refusal;
        return new Response(await metrics.render(), { headers: { 'content-type': metrics.contentType } });
      },
      { detail: { hide: true } },
    );
