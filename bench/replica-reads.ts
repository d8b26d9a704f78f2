// `bun bench/replica-reads.ts`: what moving the reads that may lag to DATABASE_REPLICA_URL changes.
// A PostgreSQL 15 primary and a streaming standby made from it (Debian's binaries, as the fault
// tests run them), 20 agents, 400 threads and BENCH_MESSAGES messages (default 20 000) posted
// through the domain. Then the same reads, taking turns, through the one module that routes them
// (src/db/reads.ts): on the primary (no replica set) and on the replica. For each: latency, and the
// primary's CPU per read (its postmaster and every process under it), the figure a replica is
// there to take off it. BENCH_SAMPLES sets the timed runs per read and side (default 40).
import { cpus, totalmem } from 'node:os';
import { connect, onPrimary, type Reads, type Sql } from '../src/db/connect';
import { migrate } from '../src/db/migrate';
import { replicaReads } from '../src/db/reads';
import { listAgents, ALL_AGENTS } from '../src/domain/agents/agent-overview';
import { createAgent } from '../src/domain/agents/agents';
import type { Actor } from '../src/domain/agents/actors';
import { overview } from '../src/domain/deliveries/overview';
import { messageSearch, searchMessages } from '../src/domain/messages/message-search';
import { postMessage } from '../src/domain/messages/messages';
import { BY_CLI } from '../src/domain/people/audit';
import { searchGate, searchingIf } from '../src/domain/shared/search-gate';
import { timeKeyedPageQuery } from '../src/domain/shared/keyset';
import { createThread } from '../src/domain/threads/threads';
import { listThreadsPage, threadFilter } from '../src/domain/threads/thread-overview';
import { silentLogger } from '../src/log';
import { replicatedPair } from '../test/support/replicated-postgres';
import { databaseCpuMs, postmasterPid } from './cpu';
import { latencySummary, round } from './stats';

const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 20_000);
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 40);
const AGENTS = 20;
const THREADS = 400;
const WORDS = ['invoice', 'format', 'quarter', 'figures', 'draft', 'review', 'deploy', 'schema', 'report', 'budget', 'meeting', 'contract'];
const RULE = { warnAfterMs: [3_600_000, 86_400_000], disableAfterMs: 432_000_000, slowMs: 2_000, stalledAfterMs: 300_000 };

const started = performance.now();
const step = (line: string) => process.stderr.write(`[${((performance.now() - started) / 1000).toFixed(0)} s] ${line}\n`);

step('primary and streaming standby');
const pair = await replicatedPair({ synchronous: false });
const primary: Sql = connect(pair.primary.url, 8);
const replica = replicaReads(primary, pair.standby.url, { poolSize: 8, connectTimeoutS: 5, options: { statementTimeoutMs: 30_000 } }, silentLogger);
try {
  await migrate(primary, pair.primary.url);
  const actors: Actor[] = [];
  for (let i = 0; i < AGENTS; i++) {
    const username = `agent-${i}`;
    await createAgent(primary, BY_CLI, { username }, { allowLocal: true });
    const [row] = await primary<{ id: string }[]>`select id from agents where username = ${username}`;
    actors.push({ kind: 'agent', id: row!.id, username });
  }
  const threads: { id: string; opener: Actor }[] = [];
  for (let i = 0; i < THREADS; i++) {
    const opener = actors[i % AGENTS]!;
    const other = actors[(i + 1) % AGENTS]!;
    threads.push({ id: (await createThread(primary, opener, { title: `thread ${i} ${WORDS[i % WORDS.length]}`, participantUsernames: [other.username] })).id, opener });
  }
  step(`posting ${MESSAGES} messages`);
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      for (let i = next++; i < MESSAGES; i = next++) {
        const thread = threads[i % THREADS]!;
        const content = Array.from({ length: 12 }, (_, k) => WORDS[(i * 7 + k * 5) % WORDS.length]).join(' ') + ` number ${i}`;
        await postMessage(primary, silentLogger, thread.opener, thread.id, { content });
      }
    }),
  );
  // Settled before timing, so that autovacuum after the fill does not count as the reads' CPU.
  await primary`vacuum analyze`;
  await primary`checkpoint`;
  const [{ lsn }] = (await primary`select pg_current_wal_lsn()::text as lsn`) as unknown as [{ lsn: string }];
  for (;;) {
    const [row] = await pair.standby.query<{ caught: boolean }>(`select pg_last_wal_replay_lsn() >= '${lsn}'::pg_lsn as caught`);
    if (row!.caught) break;
    await Bun.sleep(50);
  }
  step('standby caught up');

  const postmaster = await postmasterPid(pair.primary.url);
  const searcher = actors[0]!;
  const person = actors[1]!.id;
  const reads: [string, (on: Reads) => Promise<unknown>][] = [
    ['dashboard overview', (on) => overview(on, RULE)],
    ['dashboard agents, first page', (on) => listAgents(on, ALL_AGENTS, { after: null, since: null, limit: 50 }, RULE)],
    ['dashboard threads, first page', (on) => searchingIf(searchGate(on, { timeoutMs: 30_000, concurrency: 4 }), null, person, new AbortController().signal, (db) => listThreadsPage(db, threadFilter({}), timeKeyedPageQuery({})))],
    ['search, common word', (on) => searchMessages(searchGate(on, { timeoutMs: 30_000, concurrency: 4 }), searcher, messageSearch({ q: 'invoice' }))],
  ];
  const sides: [string, Reads][] = [
    ['primary', onPrimary(primary)],
    ['replica', replica],
  ];
  const figures: Record<string, Record<string, { p50: number; p99: number; primaryCpuMsPerRead: number | null }>> = {};
  for (const [label, read] of reads) {
    const samples: Record<string, number[]> = { primary: [], replica: [] };
    const cpu: Record<string, number> = { primary: 0, replica: 0 };
    for (const [, on] of sides) for (let w = 0; w < 3; w++) await read(on);
    for (let i = 0; i < SAMPLES; i++) {
      for (const [side, on] of sides) {
        const before = postmaster === null ? 0 : databaseCpuMs(postmaster);
        const t0 = performance.now();
        await read(on);
        samples[side]!.push(performance.now() - t0);
        cpu[side]! += postmaster === null ? 0 : databaseCpuMs(postmaster) - before;
      }
    }
    figures[label] = Object.fromEntries(
      sides.map(([side]) => {
        const { p50, p99 } = latencySummary(samples[side]!);
        return [side, { p50, p99, primaryCpuMsPerRead: postmaster === null ? null : round(cpu[side]! / SAMPLES) }];
      }),
    );
    step(`${label}: ${JSON.stringify(figures[label])}`);
  }
  const machine = `${cpus().length} × ${cpus()[0]?.model ?? 'unknown'}, ${round(totalmem() / 1024 ** 3, 1)} GB, Bun ${Bun.version}`;
  console.log(JSON.stringify({ machine, messages: MESSAGES, samples: SAMPLES, servedOnReplica: replica.served(), figures }, null, 2));
} finally {
  await replica.stop();
  await primary.end({ timeout: 5 });
  await pair.stop();
}
