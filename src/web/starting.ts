import { DATABASE_UNAVAILABLE } from '../db/unavailable';
import { refusalFor } from './envelope';
import { REQUEST_ID_HEADER, requestIdFrom } from './request-id';

// The port answers from the first moment of a start, before the database is ready (the embedded
// PostgreSQL starting, a migration, PostgreSQL out of connections and waited for): 503 in the
// envelope, as any request gets while the database is away, so that a client or load balancer
// hears "try again in a moment" instead of a refused connection. The service takes the port over
// once every part has started. Each answer closes its connection, so that no client keeps talking
// to this stand-in after the handover.
export function holdPort(hostname: string, port: number) {
  const server = Bun.serve({
    hostname,
    port,
    fetch: (request) =>
      Response.json(refusalFor(request, { sentence: DATABASE_UNAVAILABLE, code: 'unavailable' }), {
        status: 503,
        headers: { [REQUEST_ID_HEADER]: requestIdFrom(request), 'retry-after': '1', connection: 'close' },
      }),
  });
  return { port: server.port!, release: () => void server.stop(true) };
}
