import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type Sql } from '../src/db/connect';
import { startEmbedded, type EmbeddedDatabase } from '../src/db/embedded';
import { asActor } from '../src/domain/agents/actors';
import { createAgent } from '../src/domain/agents/agents';
import { postMessage } from '../src/domain/messages/messages';
import { openThread } from '../src/domain/threads/threads';
import { silentLogger } from '../src/log';
import { freePort } from '../test/support/ports';
import { eventually, receiver } from '../test/support/receiver';
import { startService, type Service } from './support/service';
import { BY_CLI } from '../src/domain/people/audit';

// The worker fetches its jobs in batches for the whole pool and completes them in batches
// (webhooks/worker.ts). The database restarts in the middle of draining a backlog: batches of
// fetched, running, recorded and completing jobs are all cut off at once. Nothing may be lost,
// no attempt recorded twice, no job run again after its attempt was recorded, and the worker must
// neither stop ringing nor hang when it is stopped afterwards.
const dataDir = mkdtempSync(join(tmpdir(), 'ams-pg-batches-'));
let port: number;
let pg: EmbeddedDatabase;
let sql: Sql;
let server: Service | undefined;
const CONCURRENCY = 32;
const RECIPIENTS = 4;
const POSTS = 1_000;

beforeAll(async () => {
  port = await freePort();
  pg = await startEmbedded(dataDir, port, silentLogger);
  sql = connect(pg.url, 4);
}, 90_000);
afterAll(async () => {
  if (server && server.proc.exitCode === null) await server.stop();
  await sql?.end({ timeout: 1 });
  await pg?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const arrivals = new Map<string, number>();
// A handler that takes a few milliseconds, so that the drain is still under way at the restart.
const hook = receiver(async (req) => {
  const { deliveryId } = JSON.parse(req.raw).data as { deliveryId: string };
  arrivals.set(deliveryId, (arrivals.get(deliveryId) ?? 0) + 1);
  await Bun.sleep(5);
  return new Response('ok');
});

test('a database restart in the middle of batched fetches and completions loses nothing and runs no recorded job again', async () => {
  // The service migrates the database as it starts.
  server = await startService({ DATABASE_URL: pg.url, WEBHOOK_CONCURRENCY: String(CONCURRENCY), DB_CONNECT_TIMEOUT_S: '2' });
  await createAgent(sql, BY_CLI, { username: 'batch-sender' }, { allowLocal: true });
  const usernames: string[] = [];
  for (let i = 0; i < RECIPIENTS; i++) {
    const username = `batch-hook-${i}`;
    await createAgent(sql, BY_CLI, { username, webhookUrl: hook.url(`/${i}`) }, { allowLocal: true });
    usernames.push(username);
  }
  const [sender] = await sql<{ id: string }[]>`select id from agents where username = 'batch-sender'`;
  const actor = asActor({ id: sender!.id, username: 'batch-sender' });
  const thread = await openThread(sql, actor, { title: 'backlog', participantUsernames: usernames });

  // The backlog commits at once: POSTS × RECIPIENTS doorbells queued together.
  await sql.begin(async (tx) => {
    for (let i = 0; i < POSTS; i++) await postMessage(tx as unknown as Sql, silentLogger, actor, thread.id, { content: `backlog ${i}` });
  });
  const total = POSTS * RECIPIENTS;
  await eventually(async () => arrivals.size >= total / 8, 30_000);
  await pg.stop();
  const arrivedBeforeRestart = arrivals.size;
  await Bun.sleep(2_000);
  pg = await startEmbedded(dataDir, port, silentLogger);
  expect(arrivedBeforeRestart).toBeLessThan(total);

  // Nothing lost: every delivery reaches Notified, and the queue holds no doorbell job (none stuck
  // locked by a fetch or completion that the restart cut off, none left to run again).
  await eventually(async () => {
    const [row] = await sql`select count(*)::int as n from deliveries where webhook and step <> 'notified'`;
    return row!.n === 0;
  }, 90_000).catch(async (error) => {
    await explainStall(server!);
    throw error;
  });
  await eventually(async () => {
    const [row] = await sql`
      select count(*)::int as n from graphile_worker._private_jobs j
      join graphile_worker._private_tasks t on t.id = j.task_id where t.identifier = 'notify'`;
    return row!.n === 0;
  }, 30_000);

  // One recorded attempt per delivery, none of them a run cut off and taken up again (what a job
  // run a second time after its attempt was recorded would log).
  const attempts = await sql<{ n: number; interrupted: number }[]>`
    select count(*)::int as n, count(*) filter (where interrupted)::int as interrupted
    from delivery_attempts group by delivery_id`;
  expect(attempts.length).toBe(total);
  expect(attempts.filter((a) => a.n !== 1 || a.interrupted !== 0)).toEqual([]);

  // Every doorbell arrived; a second arrival only for one on the wire when the database went (its
  // record failed, and it rang again once the database was back): at most one per worker slot.
  const deliveries = await sql<{ id: string }[]>`select id from deliveries`;
  expect(deliveries.filter((d) => !arrivals.has(d.id))).toEqual([]);
  const twice = deliveries.filter((d) => arrivals.get(d.id) === 2).length;
  expect(deliveries.filter((d) => (arrivals.get(d.id) ?? 0) > 2)).toEqual([]);
  expect(twice).toBeLessThanOrEqual(CONCURRENCY);

  // The worker rode it out, and a stop afterwards ends the process cleanly.
  expect(server.lines.filter((l) => l.event === 'worker_failed')).toEqual([]);
  expect(server.proc.exitCode).toBeNull();
  expect(await server.stop()).toBe(0);
  console.log(`batched drain across a restart: ${arrivedBeforeRestart} of ${total} arrived before it, ${twice} rang twice`);
}, 180_000);

// What a drain that stopped after the restart left behind, printed before the test fails (it did,
// twice in about sixty runs, and could not be made to again): the deliveries' steps, the queue's
// jobs by lock and error, what each connection was doing, and the service's log by event, with its
// last warnings and errors.
async function explainStall(service: Service) {
  const events: Record<string, number> = {};
  for (const line of service.lines) events[String(line.event)] = (events[String(line.event)] ?? 0) + 1;
  const report = {
    arrivals: arrivals.size,
    steps: await sql`select step, count(*)::int as n from deliveries group by step`,
    jobs: await sql`
      select t.identifier as task, j.locked_by is not null as locked, j.attempts, left(j.last_error, 160) as error, count(*)::int as n
      from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
      group by 1, 2, 3, 4`,
    // Jobs fetched for the pool's local queue and not started are listed in its heartbeat: locked
    // jobs counted there wait in graphile-worker's queue; the others are runs under way.
    heartbeats: await sql`
      select worker_id, cardinality(queued) as "fetchedNotStarted", round(extract(epoch from now() - beat_at))::int as "beatSecondsAgo"
      from worker_heartbeats`,
    lockedBy: await sql`
      select locked_by, count(*)::int as n, round(extract(epoch from now() - min(locked_at)))::int as "oldestSecondsAgo",
             round(extract(epoch from now() - max(locked_at)))::int as "newestSecondsAgo"
      from graphile_worker._private_jobs where locked_by is not null group by 1`,
    dueUnlocked: await sql`select count(*)::int as n from graphile_worker._private_jobs where locked_by is null and run_at <= now()`,
    connections: await sql`
      select application_name, state, wait_event, left(query, 100) as query
      from pg_stat_activity where datname is not null and pid <> pg_backend_pid()`,
    events,
    lastWarnings: service.lines.filter((line) => line.level !== 'info').slice(-40),
  };
  console.log(`batched drain stalled after the restart: ${JSON.stringify(report, null, 1)}`);
}
