import { DATABASE_UNAVAILABLE } from '../db/unavailable';
import { ok, refusalFor } from './envelope';
import { LIVENESS_PATH } from './health';
import { REQUEST_ID_HEADER, requestIdFrom } from './request-id';

// The port answers from the first moment of a start, before the database is ready (the embedded
// PostgreSQL starting, a migration, PostgreSQL out of connections and waited for): 503 in the
// envelope, as any request gets while the database is away, so that a client or load balancer
// hears "try again in a moment" instead of a refused connection. The service takes the port over
// once every part has started. Each answer closes its connection, so that no client keeps talking
// to this stand-in after the handover. The process is alive meanwhile, so its liveness path says so:
// a long migration must not look like a hung process to an orchestrator (web/health.ts).
export function holdPort(hostname: string, port: number) {
  const server = Bun.serve({
    hostname,
    port,
    fetch: (request) => {
      const headers = { [REQUEST_ID_HEADER]: requestIdFrom(request), connection: 'close' };
      if (new URL(request.url).pathname === LIVENESS_PATH) return Response.json(ok({ status: 'ok' }), { headers });
      return Response.json(refusalFor(request, { sentence: DATABASE_UNAVAILABLE, code: 'unavailable' }), {
        status: 503,
        headers: { ...headers, 'retry-after': '1' },
      });
    },
  });
  return { port: server.port!, release: () => void server.stop(true) };
}
