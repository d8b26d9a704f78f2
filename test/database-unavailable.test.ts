import { afterAll, expect, test } from 'bun:test';
import pg from 'pg';
import { connect } from '../src/db/connect';
import { isDatabaseUnavailable } from '../src/db/unavailable';
import { useHarness } from './support/harness';
import { pgGate } from './support/pg-gate';
import { eventually } from './support/receiver';

// What counts as "the database is away" rather than a fault, and that both drivers say so instead of
// leaving a query waiting. graphile-worker's driver, node-postgres, names no code when a connection
// simply closes under a query; such an error once went unhandled in graphile-worker (which does not
// await every query) and ended the process. postgres.js (ours) left a query waiting for good after a
// cut: both were seen now and then in test-faults/connection-exhaustion.test.ts.
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
  const client = new pg.Client({ connectionString: gate.url(h.db.url) });
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

function gateFor(url: string) {
  const target = new URL(url);
  const gate = pgGate({ host: target.hostname, port: Number(target.port || 5432) });
  stops.push(gate.stop);
  return { gate, url: gate.url(url) };
}

const settled = (query: Promise<unknown>) =>
  Promise.race([
    query.then(
      () => 'answered',
      (error: { code?: string }) => error.code,
    ),
    Bun.sleep(5_000).then(() => 'still waiting after 5 s'),
  ]);

test('postgres.js: after a cut under a query, the next query gets the database refusal, not silence', async () => {
  const { gate, url } = gateFor(h.db.url);
  gate.open();
  const sql = connect(url, 1, 2);
  stops.push(() => sql.end({ timeout: 1 }));
  await sql`select 1`;
  const cutUnder = [settled(sql`select pg_sleep(5)`), settled(sql`select 2`)];
  await Bun.sleep(200);
  gate.close();
  gate.cutAll();
  expect(await Promise.all(cutUnder)).toEqual(['CONNECTION_CLOSED', 'CONNECTION_CLOSED']);
  // The cut query once stayed the connection's current one, so the next connection's startup error
  // was taken for its answer: the new query waited forever while the pool reconnected nonstop.
  const refused = await sql`select 3`.catch((error: unknown) => error);
  expect((refused as { code?: string }).code).toBe('53300');
  expect(isDatabaseUnavailable(refused)).toBe(true);
  gate.open();
  const [row] = await sql`select 4 as n`;
  expect(row).toEqual({ n: 4 });
});

test('postgres.js: a startup the server closes without a word settles its query once, with no reconnect storm', async () => {
  let accepted = 0;
  const silent = Bun.listen({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      open(socket) {
        accepted++;
        socket.end();
      },
      data() {},
    },
  });
  stops.push(() => silent.stop(true));
  const sql = connect(`postgres://postgres@127.0.0.1:${silent.port}/postgres`, 1, 2);
  stops.push(() => sql.end({ timeout: 1 }));
  const error = await sql`select 1`.catch((e: unknown) => e);
  expect((error as { code?: string }).code).toBe('CONNECTION_CLOSED');
  expect(isDatabaseUnavailable(error)).toBe(true);
  // Before, the query was never settled and the pool reconnected at once, thousands of times a second.
  await Bun.sleep(300);
  expect(accepted).toBe(1);
});

test('errors that are faults stay faults', () => {
  expect(isDatabaseUnavailable(new Error('relation "nope" does not exist'))).toBe(false);
  expect(isDatabaseUnavailable(Object.assign(new Error('syntax error'), { code: '42601' }))).toBe(false);
  expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly, and more'))).toBe(false);
  expect(isDatabaseUnavailable('Connection terminated unexpectedly')).toBe(false);
  expect(isDatabaseUnavailable(Object.assign(new Error('x'), { code: '08006' }))).toBe(true);
});

test('postgres.js: a LISTEN that comes back after an outage of many connection attempts calls onlisten once', async () => {
  const { gate, url } = gateFor(h.db.url);
  gate.open();
  const sql = connect(url, 1, 2);
  stops.push(() => sql.end({ timeout: 1 }));
  const heard: string[] = [];
  const relistened: string[] = [];
  for (const channel of ['storm_a', 'storm_b']) {
    await sql.listen(
      channel,
      (payload) => heard.push(`${channel} ${payload}`),
      () => relistened.push(channel),
    );
  }
  expect(relistened).toEqual(['storm_a', 'storm_b']);
  // The listening connection is cut and every new one refused for a while: the pool tries again
  // and again (its backoff here is capped at 1 s), each failed attempt closing it once more.
  gate.close();
  gate.cutAll();
  await Bun.sleep(2_500);
  gate.open();
  await eventually(async () => relistened.length >= 4, 10_000);
  // Any wake-ups still to come would come now, with the connection back.
  await Bun.sleep(500);
  expect(relistened.toSorted()).toEqual(['storm_a', 'storm_a', 'storm_b', 'storm_b']);
  await sql.notify('storm_a', 'one');
  await eventually(async () => heard.length === 1, 5_000);
  await Bun.sleep(100);
  expect(heard).toEqual(['storm_a one']);
});

test('postgres.js: a LISTEN that fails leaves nothing behind, so asking again listens once', async () => {
  const { gate, url } = gateFor(h.db.url);
  const sql = connect(url, 1, 2);
  stops.push(() => sql.end({ timeout: 1 }));
  const heard: string[] = [];
  const refused = await sql.listen('retry_a', (payload) => heard.push(payload)).catch((error: { code?: string }) => error.code);
  expect(refused).toBe('53300');
  gate.open();
  await sql.listen('retry_a', (payload) => heard.push(payload));
  await sql.notify('retry_a', 'once');
  await eventually(async () => heard.length === 1, 5_000);
  await Bun.sleep(100);
  expect(heard).toEqual(['once']);
});
