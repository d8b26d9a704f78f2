// True when an error means the database cannot be reached right now (refused, dropped, shutting
// down, starting up, out of connections) rather than that something is wrong with the request or
// the code: such a request deserves 503, "try again shortly", not 500.
const CONNECTION_CODES = new Set([
  // Sockets, as Bun and Node name them.
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  // postgres.js
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  // Ours: a batched statement that never answered (batcher.ts).
  'STATEMENT_LOST',
  // PostgreSQL: admin_shutdown, crash_shutdown, cannot_connect_now, too_many_connections.
  '57P01',
  '57P02',
  '57P03',
  '53300',
]);

// node-postgres (graphile-worker's driver) gives a connection that simply closes, or a pool that
// cannot connect in time, no code at all: its own sentences are the only sign.
const PG_CONNECTION_LOST = /^(Connection terminated( unexpectedly| due to connection timeout)?|Client has encountered a connection error and is not queryable|timeout exceeded when trying to connect)$/;

export function isDatabaseUnavailable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  // Class 08 is PostgreSQL's "connection exception".
  if (typeof code === 'string') return CONNECTION_CODES.has(code) || code.startsWith('08');
  return error instanceof Error && PG_CONNECTION_LOST.test(error.message);
}

// PostgreSQL's query_canceled: a statement stopped at STATEMENT_TIMEOUT_MS, by our cancel when its
// client left, or by an operator. A bound doing its work, not a fault.
export function isStatementStopped(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === '57014';
}

export const DATABASE_UNAVAILABLE = 'The database is unavailable right now; try again in a moment.';
