import { afterAll, expect, test } from 'bun:test';
import pg from 'pg';
import { isDatabaseUnavailable } from '../src/db/unavailable';
import { useHarness } from './support/harness';
import { pgGate } from './support/pg-gate';

// What counts as "the database is away" rather than a fault. graphile-worker's driver, node-postgres,
// names no code when a connection simply closes under a query; such an error once went unhandled
// in graphile-worker (which does not await every query) and ended the process
// (test-faults/connection-exhaustion.test.ts, now and then).
const h = useHarness();
const stops: (() => unknown)[] = [];
afterAll(async () => {
  for (const stop of stops.reverse()) await stop();
});

test('a node-postgres query whose connection is cut under it is the database being away', async () => {
  const target = new URL(h.db.url);
  const gate = pgGate({ host: target.hostname, port: Number(target.port || 5432) });
  stops.push(gate.stop);
  gate.open();
  const through = new URL(h.db.url);
  through.hostname = '127.0.0.1';
  through.port = String(gate.port);
  const client = new pg.Client({ connectionString: through.toString() });
  client.on('error', () => {});
  await client.connect();
  const cutUnder = client.query('select pg_sleep(5)').then(
    () => null,
    (error: unknown) => error,
  );
  await Bun.sleep(200);
  gate.cutAll();
  const error = (await cutUnder) as Error;
  expect(error.message).toBe('Connection terminated unexpectedly');
  expect(isDatabaseUnavailable(error)).toBe(true);
  // The same client, asked again, refuses in its own words; that too is the database being away.
  const again = (await client.query('select 1').then(
    () => null,
    (e: unknown) => e,
  )) as Error;
  expect(again.message).toBe('Client has encountered a connection error and is not queryable');
  expect(isDatabaseUnavailable(again)).toBe(true);
});

test('errors that are faults stay faults', () => {
  expect(isDatabaseUnavailable(new Error('relation "nope" does not exist'))).toBe(false);
  expect(isDatabaseUnavailable(Object.assign(new Error('syntax error'), { code: '42601' }))).toBe(false);
  expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly, and more'))).toBe(false);
  expect(isDatabaseUnavailable('Connection terminated unexpectedly')).toBe(false);
  expect(isDatabaseUnavailable(Object.assign(new Error('x'), { code: '08006' }))).toBe(true);
});
