// `bun bench/endpoint-health.ts`: do the dashboard's reads of endpoint health and the overview stay
// fast at a million deliveries? A fresh database (embedded PostgreSQL unless DATABASE_URL is set)
// is migrated and filled in set-based SQL: 200 agents (50 with webhooks: 10 failing, 2 of them
// switched off), 20 000 threads, 1 000 000 messages and deliveries over 30 days (a tenth in the last
// 24 h), 100 000 delivery attempts, 50 endpoint health rows (each keeping its last 100 attempts'
// durations) and a day of 5-minute windows for each endpoint. Then each read is timed, all of them
// taking turns, beside two reads already known to be fast measured in the same run: attention()
// (the navigation's counts) and the Deliveries page's first page. Every statement a read sends is
// then run once under EXPLAIN (ANALYZE, BUFFERS): its time, the indexes it used and any sequential
// scan are printed, the whole plans written to BENCH_PLANS (default
// /tmp/ams-endpoint-health-plans.txt). BENCH_SAMPLES sets the timed runs per read (default 30).
import { cpus, totalmem } from 'node:os';
import postgres from 'postgres';
import { onPrimary, type Sql } from '../src/db/connect';
import { ALL_AGENTS, listAgents } from '../src/domain/agents/agent-overview';
import { endpointHealthOf } from '../src/domain/agents/endpoint-health';
import { attention } from '../src/domain/deliveries/attention';
import { listDeliveries } from '../src/domain/deliveries/delivery-progress';
import { NO_FILTER } from '../src/domain/deliveries/delivery-query';
import { overview, troublePage } from '../src/domain/deliveries/overview';
import { freshDatabases } from './fresh-database';
import { percentile, round } from './stats';

const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 30);
const WARM_UP = 5;
const STALLED_AFTER_MS = 300_000; // the service's default STALLED_AFTER_MS
// The service's defaults: warnings after an hour and a day, off after 5 days, slow above 2 s.
const RULE = { warnAfterMs: [3_600_000, 86_400_000], disableAfterMs: 432_000_000, slowMs: 2_000, stalledAfterMs: STALLED_AFTER_MS };
const AGENTS = 200;
const WEBHOOK_AGENTS = 50;
const FAILING = 10;
const DISABLED = 2;
const THREADS = 20_000;
const DELIVERIES = 1_000_000;
const LAST_DAY_SHARE = 0.1;
const ATTEMPTS = 100_000;
const PLANS = process.env.BENCH_PLANS ?? '/tmp/ams-endpoint-health-plans.txt';
const TROUBLE_FIRST = { ...ALL_AGENTS, sort: 'trouble' } as const;

const started = performance.now();
const step = (line: string) => process.stderr.write(`[${((performance.now() - started) / 1000).toFixed(0)} s] ${line}\n`);

// Every statement sent while `capturing` is set, with its parameters, for EXPLAIN afterwards.
let capturing: { query: string; params: unknown[] }[] | null = null;

step('fresh database');
const db = await freshDatabases();
const sql = postgres(db.url, {
  max: 4,
  onnotice: () => {},
  types: { bigint: postgres.BigInt },
  debug: (_conn, query, params) => capturing?.push({ query, params: params as unknown[] }),
}) as unknown as Sql;

try {
  const [pg] = await sql<{ version: string }[]>`select current_setting('server_version') as version`;
  const machine = `${cpus().length} × ${cpus()[0]?.model ?? 'unknown'}, ${round(totalmem() / 1024 ** 3, 1)} GB, PostgreSQL ${pg!.version} (${process.env.DATABASE_URL ? 'DATABASE_URL' : 'embedded'}), Bun ${Bun.version}`;

  step('filling');
  const fillStarted = performance.now();
  await fill();
  const fillSeconds = round((performance.now() - fillStarted) / 1000, 1);
  const sizes = await tableSizes();
  step(`filled in ${fillSeconds} s: ${sizes.map((s) => `${s.table} ${s.rows}`).join(', ')}`);

  const webhookIds = (await sql<{ id: string }[]>`select id from agents where webhook_url is not null order by id desc limit 50`).map((r) => r.id);
  const page = { after: null, since: null, limit: 50 };
  const reads: [string, () => Promise<unknown>][] = [
    ['attention() — baseline', () => attention(sql, STALLED_AFTER_MS)],
    ['listDeliveries() first page of 50 — baseline', () => listDeliveries(sql, NO_FILTER, page, STALLED_AFTER_MS)],
    ['overview()', () => overview(onPrimary(sql), RULE)],
    [`endpointHealthOf() ${webhookIds.length} webhook agents`, () => endpointHealthOf(sql, webhookIds, RULE)],
    ['listAgents() first page of 50', () => listAgents(onPrimary(sql), ALL_AGENTS, page, RULE)],
    ['troublePage() all webhooks in trouble, a page of 50', () => troublePage(onPrimary(sql), { limit: '50' }, RULE)],
    ['listAgents() trouble first, first page of 50', () => listAgents(onPrimary(sql), TROUBLE_FIRST, page, RULE)],
    ['listAgents() health=failing,disabled', () => listAgents(onPrimary(sql), { ...ALL_AGENTS, health: ['failing', 'disabled'] }, page, RULE)],
  ];

  // A look at what the reads answer, so that the figures are of reads that found something.
  const o = await overview(onPrimary(sql), RULE);
  const h = await endpointHealthOf(sql, webhookIds, RULE);
  const agentsPage = await listAgents(onPrimary(sql), ALL_AGENTS, page, RULE);
  const seen = {
    overviewDeliveries: o.headline.deliveries,
    overviewBins: `${o.bins.length} of ${o.binMinutes} min`,
    trouble: `${o.trouble.length} of ${o.troubleTotal} in ${o.troubleGroups.length} groups`,
    troublePage: (await troublePage(onPrimary(sql), { limit: '50' }, RULE)).items.length,
    agentsInTrouble: (await listAgents(onPrimary(sql), TROUBLE_FIRST, page, RULE)).items.slice(0, FAILING).filter((a) => a.health && a.health.state !== 'healthy').length,
    stalledAgents: o.stalledAgents.length,
    closeRequests: o.closeRequests.length,
    healthStates: [...h.values()].reduce<Record<string, number>>((n, x) => ({ ...n, [x.state]: (n[x.state] ?? 0) + 1 }), {}),
    dayAttemptsOfFirstEndpoint: [...h.values()][0]?.lastDay.attempts,
    agentsPage: agentsPage.items.length,
    agentsPageWithHealth: agentsPage.items.filter((a) => a.health).length,
    agentsPageWithTestEvent: agentsPage.items.filter((a) => a.lastTestEvent).length,
  };
  step(`answers: ${JSON.stringify(seen)}`);

  step(`timing: ${WARM_UP} warm-up and ${SAMPLES} timed runs per read, taking turns`);
  const samples = reads.map(() => [] as number[]);
  for (let i = 0; i < WARM_UP + SAMPLES; i++) {
    for (const [k, [, read]] of reads.entries()) {
      const t = performance.now();
      await read();
      if (i >= WARM_UP) samples[k]!.push(performance.now() - t);
    }
  }
  const figures = reads.map(([name], k) => {
    const s = samples[k]!;
    return { name, min: round(Math.min(...s)), p50: round(percentile(s, 50)), p95: round(percentile(s, 95)), max: round(Math.max(...s)) };
  });

  step('EXPLAIN (ANALYZE, BUFFERS) of every statement the reads send');
  const explained: string[] = [];
  const planNotes: string[] = [];
  for (const [name, read] of reads) {
    capturing = [];
    await read();
    const statements = capturing;
    capturing = null;
    // A transaction's own statements have no plan.
    for (const [i, s] of statements.filter((s) => !/^\s*(begin|commit|rollback)\b/i.test(s.query)).entries()) {
      const rows = await sql.unsafe(`explain (analyze, buffers) ${s.query}`, s.params as never[]);
      const plan = rows.map((r: any) => r['QUERY PLAN']).join('\n');
      explained.push(`=== ${name}, statement ${i + 1}\n${s.query.trim()}\n\n${plan}\n`);
      const time = /Execution Time: ([\d.]+) ms/.exec(plan)?.[1];
      const indexes = [...new Set([...plan.matchAll(/(?:Index|Index Only|Bitmap Index) Scan (?:Backward )?(?:using|on) (\w+)/g)].map((m) => m[1]))];
      const seqScans = [...new Set([...plan.matchAll(/Seq Scan on (\w+)/g)].map((m) => m[1]))];
      const hits = [...plan.matchAll(/shared hit=(\d+)(?: read=(\d+))?/g)][0];
      planNotes.push(
        `| ${name} #${i + 1} | ${time} ms | ${indexes.join(', ') || '—'} | ${seqScans.join(', ') || '—'} | ${hits ? `${hits[1]}${hits[2] ? ` + ${hits[2]} read` : ''}` : '—'} |`,
      );
    }
  }
  await Bun.write(PLANS, explained.join('\n'));

  const base = figures[1]!.p50;
  const att = figures[0]!.p50;
  const out = [
    machine,
    `Built in ${fillSeconds} s: ${sizes.map((s) => `${s.table} ${s.rows.toLocaleString('en')}`).join(', ')}; ${SAMPLES} timed runs per read after ${WARM_UP} warm-up, reads taking turns, one at a time.`,
    '',
    '| Read | min | p50 | p95 | max | p50 ÷ deliveries page | p50 ÷ attention |',
    '|---|---|---|---|---|---|---|',
    ...figures.map((f) => `| ${f.name} | ${f.min} ms | ${f.p50} ms | ${f.p95} ms | ${f.max} ms | ${(f.p50 / base).toFixed(2)} × | ${(f.p50 / att).toFixed(2)} × |`),
    '',
    `EXPLAIN (ANALYZE, BUFFERS), one run each, warm (full plans: ${PLANS}):`,
    '',
    '| Statement | Execution | Indexes | Seq scans | Buffers (top node) |',
    '|---|---|---|---|---|',
    ...planNotes,
  ];
  console.log(out.join('\n'));
  await Bun.write(PLANS.replace(/\.txt$/, '.json'), JSON.stringify({ machine, fillSeconds, sizes, seen, figures, samples }, null, 2) + '\n');
  step('done');
} finally {
  await sql.end();
  await db.drop();
}

// Set-based fill. Ids are version 7 UUIDs built from each row's created_at (48 bits of
// milliseconds, then version 7, 12 bits, the variant and 60 bits that make them unique), so that
// ids and times sort alike as the service's own do. As superuser (embedded PostgreSQL) the rows are
// written with session_replication_role = replica: no foreign-key or NOTIFY triggers, the rows
// being consistent by construction.
async function fill() {
  const id = (ts: string, n: string, variant: string) =>
    `(lpad(to_hex((extract(epoch from ${ts}) * 1000)::bigint), 12, '0') || '7' || lpad(to_hex((${n}) & 4095), 3, '0') || '${variant}' || lpad(to_hex(${n}), 15, '0'))::uuid`;
  await sql.begin(async (tx) => {
    const [role] = await tx<{ superuser: boolean }[]>`select rolsuper as superuser from pg_roles where rolname = current_user`;
    if (role!.superuser) await tx`set local session_replication_role = replica`;
    await tx`select setseed(0.42)`;
    await tx.unsafe(`
      insert into usernames (username, owner) select 'agent' || g, 'agent' from generate_series(1, ${AGENTS}) g;
      -- Agent n was created n minutes before 31 days ago, so agent 1 is the newest: the first
      -- ${WEBHOOK_AGENTS}, the Agents page's first page, are the ones with webhooks.
      create temporary table ax on commit drop as
        select g as n, now() - interval '31 days' - g * interval '1 minute' as created_at from generate_series(1, ${AGENTS}) g;
      alter table ax add column id uuid;
      update ax set id = ${id('created_at', 'n', '8')};
      create unique index on ax (n);
      insert into agents (id, username, key_hash, created_at, webhook_url, signing_secret, webhook_set_at, webhook_disabled_at, webhook_disabled_reason, webhook_failing_since)
        select id, 'agent' || n, sha256(('key' || n)::bytea), created_at,
               case when n <= ${WEBHOOK_AGENTS} then 'https://hooks.example/agent' || n end,
               case when n <= ${WEBHOOK_AGENTS} then 'secret' || n end,
               case when n <= ${WEBHOOK_AGENTS} then now() - interval '40 days' end,
               case when n <= ${DISABLED} then now() - interval '2 hours' end,
               case when n <= ${DISABLED} then 'It answered no attempt with 2xx for 3 days.' end,
               case when n <= ${DISABLED} then now() - interval '3 days 2 hours' end
        from ax;
      -- Threads over the 30 days; participants: agents p1, p2 and (every other thread) p3.
      create temporary table tx_ on commit drop as
        select g as n, now() - interval '30 days 1 hour' + (g - 1) * (interval '30 days' / ${THREADS}) as created_at,
               1 + (g % ${AGENTS}) as p1, 1 + ((g % ${AGENTS}) + 1 + (g % ${AGENTS - 1})) % ${AGENTS} as p2,
               case when g % 2 = 0 then 1 + ((g % ${AGENTS}) + ${AGENTS / 2}) % ${AGENTS} end as p3
        from generate_series(1, ${THREADS}) g;
      alter table tx_ add column id uuid;
      update tx_ set id = ${id('created_at', 'n', 'a')};
      create unique index on tx_ (n);
      insert into threads (id, title, state, opened_by, close_requested_at, closed_at, created_at)
        select t.id, 'thread ' || t.n,
               (case when t.n % 500 = 0 then 'close-pending' when t.n % 7 = 0 then 'closed' else 'open' end)::thread_state,
               a.id, case when t.n % 500 = 0 then now() - (t.n % 48) * interval '1 hour' end,
               case when t.n % 500 <> 0 and t.n % 7 = 0 then now() - interval '1 hour' end, t.created_at
        from tx_ t join ax a on a.n = t.p2;
      insert into participants (thread_id, agent_id, joined_at)
        select t.id, a.id, t.created_at from tx_ t join ax a on a.n in (t.p1, t.p2, t.p3)
        on conflict do nothing;
    `);
    // Messages and deliveries: message g in thread 1 + g % threads, from p2 to p1; 90 % spread over
    // the 29 days before the last, 10 % over the last 24 h, in id order.
    const old = Math.round(DELIVERIES * (1 - LAST_DAY_SHARE));
    await tx.unsafe(`
      create temporary table mx on commit drop as
        select g as n, 1 + g % ${THREADS} as t, random() as r, 50 + (random() * random() * 3000)::int as doorbell_ms,
               case when g <= ${old} then now() - interval '30 days' + (g - 1) * (interval '29 days' / ${old})
                    else now() - interval '1 day' + (g - ${old} - 1) * (interval '1 day' / ${DELIVERIES - old}) end as created_at
        from generate_series(1, ${DELIVERIES}) g;
      insert into messages (id, thread_id, sender_agent_id, sender, content, summary, created_at)
        select ${id('m.created_at', 'm.n', '8')}, t.id, s.id, 'agent' || t.p2, 'message ' || m.n || ' about the work in thread ' || m.t,
               case when m.n % 5 = 0 then 'summary ' || m.n end, m.created_at
        from mx m join tx_ t on t.n = m.t join ax s on s.n = t.p2;
    `);
    // Where each delivery is now. Webhook recipients (agents 1–50): 2 % failed, retrying ones
    // (recent, mostly at the failing endpoints), a few stalled (notified, never reported), the
    // newest minutes still on their way, the rest fetched. Polling recipients: 2 % failed, unread
    // ones in the last hours, the rest fetched.
    await tx.unsafe(`
      insert into deliveries (id, message_id, thread_id, recipient_id, step, failed_step, error, webhook, publish_attempts, send_attempts,
                              created_at, notified_at, delivered_at, fetched_at, acknowledged_at, next_attempt_at)
        select ${id('x.created_at', 'x.n', '9')}, ${id('x.created_at', 'x.n', '8')}, t.id, a.id, (case when x.step = 'retrying' then 'accepted' else x.step end)::delivery_step,
               case when x.step = 'failed' then (case when x.webhook then 'accepted' else 'notified' end)::delivery_step end,
               case when x.step = 'failed' then 'HTTP 500' end,
               x.webhook, 1, case when x.webhook then 1 + (x.step in ('failed', 'retrying'))::int * 4 else 0 end,
               x.created_at,
               case when x.webhook and x.step in ('notified', 'delivered', 'fetched') then x.created_at + x.doorbell_ms * interval '1 ms' end,
               case when x.step in ('delivered', 'fetched') then x.created_at + (x.doorbell_ms + 200) * interval '1 ms' end,
               case when x.step = 'fetched' then x.created_at + interval '5 seconds' end,
               case when x.step = 'fetched' then x.created_at + interval '6 seconds' end,
               case when x.step = 'retrying' then now() + interval '2 minutes' end
        from (
          select m.*, t.p1 <= ${WEBHOOK_AGENTS} as webhook, t.p1,
                 case when m.r < 0.02 then 'failed'
                      when t.p1 <= ${WEBHOOK_AGENTS} and t.p1 <= ${FAILING} and m.created_at > now() - interval '6 hours' and m.r < 0.5 then 'retrying'
                      when t.p1 <= ${WEBHOOK_AGENTS} and m.created_at > now() - interval '2 days' and m.r < 0.025 then 'retrying'
                      when t.p1 <= ${WEBHOOK_AGENTS} and m.r < 0.03 then 'notified'
                      when m.created_at > now() - interval '2 minutes' then 'accepted'
                      when not t.p1 <= ${WEBHOOK_AGENTS} and m.created_at > now() - interval '3 hours' and m.r < 0.3 then 'accepted'
                      when t.p1 <= ${WEBHOOK_AGENTS} and m.r < 0.05 then 'delivered'
                      else 'fetched' end as step
          from mx m join tx_ t on t.n = m.t
        ) x join tx_ t on t.n = x.t join ax a on a.n = x.p1
        order by x.n;
    `);
    // Attempts: the newest 100 000 attempts at webhook deliveries, one or (retried) several each.
    await tx.unsafe(`
      insert into delivery_attempts (delivery_id, publish, attempt, attempted_at, duration_ms, status, error, url)
        select d.id, 1, k, d.created_at + k * interval '30 seconds', (20 + random() * random() * 2000)::int,
               case when d.step = 'failed' or d.next_attempt_at is not null then 500 else 200 end, null,
               'https://hooks.example/agent' || d.recipient_id
        from (select * from deliveries where webhook order by id desc limit ${ATTEMPTS}) d, generate_series(1, 1) k;
      -- Health: every webhook tried; agents 1–${FAILING} failing (1–${DISABLED} switched off).
      -- Each keeps its last 100 attempts' durations and starts, and the failing ones the handler's answer.
      insert into endpoint_health (agent_id, last_success_at, last_failure_at, last_failure_status, last_failure_error,
                                   consecutive_failures, failing_since, warned_stage, warned_at, last_failure_body, recent_ms, recent_at)
        select a.id, now() - case when a.n <= ${FAILING} then interval '1 day' else interval '20 seconds' end,
               case when a.n <= ${FAILING} then now() - interval '30 seconds' else now() - interval '3 days' end,
               case when a.n <= ${FAILING} and a.n % 2 = 0 then 500 end,
               case when a.n <= ${FAILING} and a.n % 2 = 1 then 'connect ECONNREFUSED 10.0.0.' || a.n end,
               case when a.n <= ${FAILING} then 40 + a.n else 0 end,
               case when a.n <= ${DISABLED} then now() - interval '3 days 2 hours'
                    when a.n <= ${FAILING} then now() - a.n * interval '1 hour' end,
               case when a.n <= ${FAILING} then 1 else 0 end,
               case when a.n <= ${FAILING} then now() - interval '10 minutes' end,
               case when a.n <= ${FAILING} and a.n % 2 = 0 then 'upstream down: the service behind this handler is in maintenance' end,
               array(select (20 + random() * random() * 2000)::int from generate_series(1, 100) k where a.n > 0),
               array(select now() - (101 - k) * interval '30 seconds' from generate_series(1, 100) k where a.n > 0)
        from ax a where a.n <= ${WEBHOOK_AGENTS};
      -- A day of 5-minute windows per endpoint (288 each), with an 11-bucket latency histogram.
      insert into endpoint_attempt_windows (agent_id, window_start, attempts, successes, latency_buckets, timed, sum_ms, max_ms)
        select a.id, w.start, w.attempts,
               case when a.n <= ${FAILING} then w.attempts / 4 else w.attempts - (w.attempts / 50) end,
               array[w.attempts / 4, w.attempts / 4, w.attempts / 5, w.attempts / 10, w.attempts / 20, w.attempts / 40, 1, 1, 0, 0,
                     w.attempts - (w.attempts / 4) * 2 - w.attempts / 5 - w.attempts / 10 - w.attempts / 20 - w.attempts / 40 - 2],
               w.attempts, w.attempts * 310, 2_400 + w.attempts
        from ax a,
             lateral (select date_bin('5 minutes', now(), timestamptz '2000-01-01') - k * interval '5 minutes' as start,
                             10 + (random() * 40)::int as attempts
                      from generate_series(0, 287) k) w
        where a.n <= ${WEBHOOK_AGENTS};
      -- A test event or two per webhook (the Agents page shows the newest).
      insert into endpoint_test_events (id, agent_id, url, webhook_version, requested_by, requested_at, attempted_at, duration_ms, status)
        select ${id("now() - k * interval '1 day'", 'a.n * 10 + k', 'b')}, a.id, 'https://hooks.example/agent' || a.n,
               (extract(epoch from now() - interval '40 days') * 1000000)::bigint::text, 'person1',
               now() - k * interval '1 day', now() - k * interval '1 day' + interval '1 second', 120, 200
        from ax a, generate_series(1, 2) k where a.n <= ${WEBHOOK_AGENTS};
    `);
  });
  for (const table of ['agents', 'threads', 'participants', 'messages', 'deliveries', 'delivery_attempts', 'endpoint_health', 'endpoint_attempt_windows', 'endpoint_test_events']) {
    await sql.unsafe(`vacuum analyze ${table}`);
  }
  await sql`checkpoint`.catch(() => {});
}

async function tableSizes() {
  const tables = ['agents', 'threads', 'participants', 'messages', 'deliveries', 'delivery_attempts', 'endpoint_health', 'endpoint_attempt_windows', 'endpoint_test_events'];
  const out: { table: string; rows: number }[] = [];
  for (const table of tables) {
    const [row] = await sql.unsafe<{ n: number }[]>(`select count(*)::int as n from ${table}`);
    out.push({ table, rows: row!.n });
  }
  return out;
}
