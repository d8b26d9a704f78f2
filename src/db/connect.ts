import postgres from 'postgres';

export type Sql = postgres.Sql;

export function connect(url: string, max = 20): Sql {
  return postgres(url, {
    max,
    onnotice: () => {},
    // Keep ids and counters as JS values; bigint counts come back as strings otherwise.
    types: { bigint: postgres.BigInt },
    connection: { application_name: 'agent-messaging-service' },
    // After a failed connection postgres.js waits before the next try, by default up to 20 s, and
    // a query that arrives meanwhile waits with it. Capped at 1 s, a request made while the
    // database is away is answered (503) within about a second, and the pool is back within a
    // second of the database.
    backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 1),
    connect_timeout: 10,
  });
}
