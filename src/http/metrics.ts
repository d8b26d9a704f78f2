import { Elysia } from 'elysia';
import type { Metrics } from '../metrics';
import { refuseNonOperator } from './operator';

const started = new WeakMap<Request, number>();

// Every request timed by method, route template (never the raw path: ids would make a series per
// thread) and status; and GET /metrics for a scraper holding the operator token.
export const metricsRoutes = (metrics: Metrics, token: string | undefined) =>
  new Elysia({ name: 'metrics' })
    .onRequest(({ request }) => {
      started.set(request, performance.now());
    })
    .onAfterResponse({ as: 'global' }, ({ request, route, set, responseValue }) => {
      const since = started.get(request);
      if (since === undefined) return;
      const status = responseValue instanceof Response ? responseValue.status : Number(set.status ?? 200);
      metrics.httpRequest(request.method, route || 'unmatched', status, (performance.now() - since) / 1000);
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
