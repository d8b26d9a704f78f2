// `bun bench/governance.ts` (or `BENCH_ONLY=governance bun run bench`): what people's rules cost
// the post path, in one run on a fresh database.
// - Post throughput with the rules on (a quota counted on every post, the loop breaker reading
//   after every post, contact policies set) against the same posts with them off (no quota, no
//   loop breaker), alternating, GOVERNANCE_RUNS times each (default 3), GOVERNANCE_SECONDS each.
// - Approving 1 000 held messages at once, per message, against posting 1 000 messages (64 at a
//   time) per message.
import { connect, type Sql } from '../src/db/connect';
import { asActor, type Actor } from '../src/domain/agents/actors';
import { createAgent } from '../src/domain/agents/agents';
import { approveHeld } from '../src/domain/messages/holds';
import { postMessage } from '../src/domain/messages/messages';
import { governSends, type SendRules } from '../src/domain/messages/send-rules';
import { BY_CLI } from '../src/domain/people/audit';
import { openThread } from '../src/domain/threads/threads';
import { silentLogger } from '../src/log';
import { freshDatabases } from './fresh-database';
import { median, round } from './stats';

const runs = Number(process.env.GOVERNANCE_RUNS ?? 3);
const seconds = Number(process.env.GOVERNANCE_SECONDS ?? 5);
const CONCURRENCY = 64;
const THREADS = Number(process.env.GOVERNANCE_THREADS ?? 16);
const progress = (line: string) => process.stderr.write(`${line}\n`);

const ON: SendRules = { messagesPerMinute: 1_000_000_000, threadsPerHour: 1_000_000_000, holdHours: 168, loopMessages: 50, loopWindowMinutes: 10 };
const OFF: SendRules = { ...ON, messagesPerMinute: 0, threadsPerHour: 0, loopMessages: 0 };

const db = await freshDatabases();
const on = connect(db.url, 10);
const off = connect(db.url, 10);
governSends(on, ON);
governSends(off, OFF);

try {
  let n = 0;
  const agent = async (base: string) => {
    const username = `${base}-${++n}`;
    await createAgent(on, BY_CLI, { username }, { allowLocal: true });
    const [row] = await on<{ id: string }[]>`select id from agents where username = ${username}`;
    return asActor({ id: row!.id, username });
  };
  // One sender and one recipient per thread; the recipients accept only their contacts (the sender
  // shares the thread, so it is admitted), which costs a post nothing but is on.
  const pairs: { sender: Actor; threadId: string }[] = [];
  for (let i = 0; i < THREADS; i++) {
    const sender = await agent('sender');
    const recipient = await agent('recipient');
    const { id } = await openThread(on, sender, { title: `bench ${i}`, participantUsernames: [recipient.username] });
    pairs.push({ sender, threadId: id });
  }
  await on`update agents set contact_policy = 'contacts' where username like 'recipient-%'`;

  // Posts for `ms` from CONCURRENCY posters; answers posts per second.
  const throughput = async (sql: Sql, ms: number) => {
    const until = performance.now() + ms;
    let posted = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async (_, w) => {
        const { sender, threadId } = pairs[w % THREADS]!;
        while (performance.now() < until) {
          await postMessage(sql, silentLogger, sender, threadId, { content: `bench post ${posted}` });
          posted++;
        }
      }),
    );
    return posted / (ms / 1000);
  };

  progress('warm-up');
  await throughput(off, 1000);
  await throughput(on, 1000);
  const figures = { on: [] as number[], off: [] as number[] };
  for (let r = 0; r < runs; r++) {
    for (const mode of r % 2 ? (['on', 'off'] as const) : (['off', 'on'] as const)) {
      const perSecond = await throughput(mode === 'on' ? on : off, seconds * 1000);
      figures[mode].push(perSecond);
      progress(`run ${r + 1} ${mode}: ${round(perSecond)} posts/s`);
    }
  }

  // Approving a thousand held messages at once, against posting a thousand.
  const held = await agent('held');
  const heard = await agent('heard');
  const { id: heldThread } = await openThread(on, held, { title: 'held', participantUsernames: [heard.username] });
  const thousand = async (sql: Sql, actor: Actor, threadId: string) => {
    const ids: string[] = [];
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async (_, w) => {
        for (let i = w; i < 1000; i += CONCURRENCY) ids.push((await postMessage(sql, silentLogger, actor, threadId, { content: `held ${i}` })).id);
      }),
    );
    return { ids, ms: performance.now() - started };
  };
  const approvals: number[] = [];
  const postings: number[] = [];
  for (let r = 0; r < runs; r++) {
    const posted = await thousand(on, pairs[0]!.sender, pairs[0]!.threadId);
    postings.push(posted.ms / 1000);
    await on`update agents set holds_messages = true where id = ${held.id}`;
    const waiting = await thousand(on, held, heldThread);
    await on`update agents set holds_messages = false where id = ${held.id}`;
    const started = performance.now();
    const decided = await approveHeld(on, silentLogger, BY_CLI, waiting.ids);
    approvals.push((performance.now() - started) / 1000);
    if (decided.approved.length !== 1000) throw new Error(`approved ${decided.approved.length} of 1000`);
    progress(`run ${r + 1}: a post ${round(posted.ms / 1000)} ms, an approval ${round(approvals.at(-1)!)} ms per message`);
  }

  const offMedian = median(figures.off);
  const onMedian = median(figures.on);
  console.log('| Figure | Rules off | Rules on | On / off |');
  console.log('|---|---|---|---|');
  console.log(`| Posts per second (${CONCURRENCY} posters, ${THREADS} threads) | ${round(offMedian)} | ${round(onMedian)} | ${round(onMedian / offMedian)} |`);
  console.log('');
  console.log('| Figure | A post (1 000, 64 at a time) | An approval (1 000 at once) | Approval / post |');
  console.log('|---|---|---|---|');
  console.log(`| ms per message | ${round(median(postings))} | ${round(median(approvals))} | ${round(median(approvals) / median(postings))} |`);
  console.log(JSON.stringify({ postsPerSecond: figures, msPerPost: postings, msPerApproval: approvals }));
} finally {
  await on.end();
  await off.end();
  await db.drop();
}
