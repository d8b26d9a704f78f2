import postgres from 'postgres';

// The types option below: int8 values (ids, counts not cast to int) come back as JS bigint, and
// bigint parameters are sent as int8.
type Types = { bigint: bigint };
export type Sql = postgres.Sql<Types>;
export type TransactionSql = postgres.TransactionSql<Types>;
// Where a domain function runs its queries: the pool, or the connection of a transaction.
export type Queries = Sql | TransactionSql;
// Where a read that may be a moment stale runs: the dashboard's lists and overview, message search
// and the directory, each a domain function that takes this handle instead of the pool (every other
// read and every write takes the primary's pool, so that a caller always sees its own writes).
// reads.ts decides where: a replica's pool or the primary's.
export type Reads = {
  mayLag<T>(read: (sql: Sql) => Promise<T>): Promise<T>;
  // Resolves once those reads see every write committed before the call (or a bounded time has
  // passed): for a page told of a change to read its list again only when the list will show it.
  caughtUp(): Promise<void>;
};

// Reads that may lag, on the primary: no replica is set up (and tests that call the domain directly).
export const onPrimary = (sql: Sql): Reads => ({ mayLag: (read) => read(sql), caughtUp: async () => {} });

export function connect(
  url: string,
  max = 20,
  connectTimeoutSeconds = 5,
  {
    onclose,
    applicationName = 'agent-messaging-service',
    maxLifetime,
    statementTimeoutMs,
    prepare = true,
  }: { onclose?: () => void; applicationName?: string; maxLifetime?: null; statementTimeoutMs?: number; prepare?: boolean } = {},
): Sql {
  return postgres(url, {
    max,
    onclose,
    // Through a transaction pooler a statement prepared on one server connection is not there on
    // the next: postgres.js then waits for an answer that never comes (src/db/pooler.ts).
    prepare,
    // Given at all, even as undefined, the key would replace postgres.js's default lifetime.
    ...(maxLifetime === null ? { max_lifetime: null } : {}),
    onnotice: () => {},
    // Keep ids and counters as JS values; bigint counts come back as strings otherwise.
    types: { bigint: postgres.BigInt },
    // A statement past statementTimeoutMs is stopped by PostgreSQL itself, whatever sent it: the
    // bound on any one statement's cost that no caller's input can lift.
    connection: { application_name: applicationName, ...(statementTimeoutMs !== undefined && { statement_timeout: statementTimeoutMs }) },
    // After a failed connection postgres.js waits before the next try, by default up to 20 s, and
    // a query that arrives meanwhile waits with it. Capped at 1 s, a request made while the
    // database is away is answered (503) within about a second, and the pool is back within a
    // second of the database.
    backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 1),
    // A connection attempt that is neither accepted nor refused (a database shutting down or
    // starting, a full listen backlog, a lost packet) holds every query queued behind it, so it
    // bounds how long a request can wait before its 503.
    connect_timeout: connectTimeoutSeconds,
  });
}
