import { timingSafeEqual } from 'node:crypto';
import { Elysia } from 'elysia';
import type { Metrics } from '../metrics';
import { fail } from './envelope';

const started = new WeakMap<Request, number>();

const sameToken = (given: string, expected: string) => {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
};

// Every request timed by method, route template (never the raw path: ids would make a series per
// thread) and status; and GET /metrics for a scraper holding METRICS_TOKEN. Without a token
// configured the figures are not served at all.
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
        if (!token) {
          set.status = 404;
          return fail('Metrics are off: set METRICS_TOKEN to serve them here.');
        }
        const given = /^Bearer\s+(\S+)$/i.exec(request.headers.get('authorization') ?? '')?.[1];
        if (!given || !sameToken(given, token)) {
          set.status = 401;
          set.headers['www-authenticate'] = 'Bearer realm="metrics"';
          return fail('Send the metrics token: "Authorization: Bearer <METRICS_TOKEN>".');
        }
        return new Response(await metrics.render(), { headers: { 'content-type': metrics.contentType } });
      },
      { detail: { hide: true } },
    );
