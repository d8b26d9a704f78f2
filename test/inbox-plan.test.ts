import { expect, test } from 'bun:test';
import type { Sql } from '../src/db/connect';
import { inbox } from '../src/domain/deliveries/inbox';
import { useHarness } from './support/harness';

// The statistics of a real database under which the planner once read a whole backlog for each
// page: one agent with most of the deliveries, all in one thread, among thousands of threads with
// a delivery or two. Knowing the agent but not which thread is visible, the planner expected a
// thread to hold a few rows, and so started from the agent's threads and walked each of them on
// (thread_id, id), reading every delivery of the backlog, then sorting (bench: a million-row
// backlog took 0.5 s a page instead of 0.3 ms).
const h = useHarness();

// The statement the service sends for an agent's page, as postgres.js sends it, explained (and
// run) with the same parameters; `check` looks at the page the agent was answered. `sent` collects
// every statement the call sent.
async function explainedPage(key: string, check: (res: Awaited<ReturnType<typeof h.call>>) => void, sent: string[] = []) {
  const sql = h.db.sql;
  const options = (sql as unknown as { options: { debug: unknown } }).options;
  let page: { query: string; parameters: unknown[] } | undefined;
  options.debug = (_connection: number, query: string, parameters: unknown[]) => {
    sent.push(query);
    if (query.includes('order by d.recipient_id, d.id')) page = { query, parameters };
  };
  try {
    check(await h.call('GET', '/api/deliveries', { key }));
  } finally {
    options.debug = false;
  }
  const [explained] = await sql.unsafe(`explain (analyze, format json) ${page!.query}`, page!.parameters as never[]);
  return explained!;
}
const BACKLOG = 20_000;
const OTHER_THREADS = 3_000;

test('the inbox page is read off the inbox index, whatever the statistics', async () => {
  const sender = await h.agent('sender');
  const heavy = await h.agent('heavy');
  await h.agent('other');
  const backlogThread = await h.thread(sender, [heavy], 'backlog');
  const sql = h.db.sql;
  const [ids] = await sql<{ sender: string; heavy: string; other: string }[]>`
    select (select id from agents where username = 'sender') as sender, (select id from agents where username = 'heavy') as heavy,
           (select id from agents where username = 'other') as other`;
  await sql.begin(async (tx) => {
    // Set-based and in creation order, as a long-lived deployment would have written them.
    const threads = await tx<{ id: string }[]>`
      insert into threads (title, opened_by) select 'other ' || g, ${ids!.sender} from generate_series(1, ${OTHER_THREADS}::int) g returning id`;
    const threadIds = threads.map((t) => t.id);
    await tx`
      insert into participants (thread_id, agent_id)
      select t, a from unnest(${threadIds}::uuid[]) t, unnest(array[${ids!.sender}, ${ids!.other}]::uuid[]) a`;
    await tx`
      with m as (
        insert into messages (thread_id, sender_agent_id, sender, content)
        select t, ${ids!.sender}, 'sender', 'hello' from unnest(${threadIds}::uuid[]) t
        returning id, thread_id
      )
      insert into deliveries (message_id, thread_id, recipient_id, webhook) select id, thread_id, ${ids!.other}, false from m`;
    await tx`
      with m as (
        insert into messages (thread_id, sender_agent_id, sender, content)
        select ${backlogThread}, ${ids!.sender}, 'sender', 'backlog ' || g from generate_series(1, ${BACKLOG}::int) g
        returning id, thread_id
      )
      insert into deliveries (message_id, thread_id, recipient_id, webhook) select id, thread_id, ${ids!.heavy}, false from m`;
  });
  await sql`analyze deliveries`;
  await sql`analyze threads`;
  await sql`analyze participants`;

  const plan = await explainedPage(heavy.key, (res) => {
    expect(res.status).toBe(200);
    expect(res.body.data.length).toBe(50);
    expect(res.body.data[0].summary).toBe('backlog 1');
  });
  const json = JSON.stringify(plan);
  // A page reads about a page of rows: no step of the plan handles the backlog.
  const rowsPerStep = [...json.matchAll(/"Actual Rows":([\d.]+)/g)].map((m) => Number(m[1]));
  expect(Math.max(...rowsPerStep)).toBe(50);
  // In the inbox's order, off an index on (recipient_id, id): the partial inbox index, or the
  // dashboard's on all of an agent's deliveries when nothing is acknowledged and the two tie.
  const indexes = [...json.matchAll(/"Index Name":"([a-z_]+)"/g)].map((m) => m[1]);
  expect(indexes.filter((name) => name!.startsWith('deliveries_'))).toHaveLength(1);
  expect(['deliveries_inbox_idx', 'deliveries_recipient_page_idx']).toContain(indexes.find((name) => name!.startsWith('deliveries_'))!);
}, 60_000);

// On the statistics above, a plan made for the heavy agent's values looked cheaper than the generic
// one, and PostgreSQL planned the page afresh at every read: half its CPU. With no value of the
// caller's visible to the planner, the first five reads are planned for their values (as always)
// and every read after them runs the one generic plan.
test('the inbox page is planned once per connection, not at every read', async () => {
  const sql = h.db.sql;
  const [heavy] = await sql<{ id: string }[]>`select id from agents where username = 'heavy'`;
  const connection = await sql.reserve();
  try {
    for (let i = 0; i < 10; i++) {
      expect(await inbox(connection as unknown as Sql, { id: heavy!.id, username: 'heavy' }, 50)).toHaveLength(50);
    }
    const plans = await connection<{ generic: number; custom: number }[]>`
      select generic_plans::int as generic, custom_plans::int as custom from pg_prepared_statements
      where strpos(statement, 'order by d.recipient_id, d.id') > 0 and strpos(statement, 'pg_prepared_statements') = 0`;
    expect([...plans]).toEqual([{ generic: 5, custom: 5 }]);
  } finally {
    connection.release();
  }
});

// A page of deliveries written by posts shows what each delivery carries (sql/036): it reads no
// message and, for messages without files, no file. What only some pages need is not even a step
// of the page's plan (each step is set up at every execution, run or not): it is one more
// statement, which such a page does not send.
type PlanNode = { 'Relation Name'?: string; 'Actual Loops': number; Plans?: PlanNode[] };
const nodes = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(nodes)];
const readsMessages = (statement: string) => /\bfrom messages\b/.test(statement);

test('a page of posted deliveries reads no message and looks up no files', async () => {
  const sender = await h.agent('poster');
  const reader = await h.agent('reader');
  const threadId = await h.thread(sender, [reader], 'posted');
  for (let i = 0; i < 3; i++) await h.post(sender, threadId, `posted ${i}`);
  const sent: string[] = [];
  const explained = await explainedPage(reader.key, (res) => {
    expect(res.body.data.map((e: { summary: string }) => e.summary)).toEqual(['posted 0', 'posted 1', 'posted 2']);
  }, sent);
  const all = nodes((explained['QUERY PLAN'] as { Plan: PlanNode }[])[0]!.Plan);
  const loopsOn = (relation: string) => all.filter((n) => n['Relation Name'] === relation).map((n) => n['Actual Loops']);
  expect(loopsOn('deliveries')).toEqual([1]);
  expect(loopsOn('messages')).toEqual([]);
  expect(loopsOn('message_files')).toEqual([]);
  expect(sent.filter(readsMessages)).toEqual([]);
});

// A delivery written before its copies (sql/036) and one whose message carries a file: the page
// reads those two messages, and only those, in one more statement.
test('a page that needs messages reads those it needs in one more statement', async () => {
  const sender = await h.agent('mixed-sender');
  const reader = await h.agent('mixed-reader');
  const threadId = await h.thread(sender, [reader], 'mixed');
  const older = await h.post(sender, threadId, 'written before the copies');
  await h.post(sender, threadId, 'posted with its copies');
  const file = await h.call('POST', '/api/files?name=a.txt', { key: sender.key, raw: 'a file', headers: { 'content-type': 'text/plain' } });
  expect(file.status).toBe(201);
  const carrying = await h.call('POST', `/api/threads/${threadId}/messages`, { key: sender.key, body: { content: 'with a file', files: [file.body.data.id] } });
  expect(carrying.status).toBe(201);
  await h.db.sql`update deliveries set sender = null, summary = null, carries_files = null where message_id = ${older.id}`;
  const sent: string[] = [];
  await explainedPage(reader.key, (res) => {
    expect(res.body.data.map((e: { summary: string; sender: string; files: unknown[] }) => [e.summary, e.sender, e.files.length])).toEqual([
      ['written before the copies', sender.username, 0],
      ['posted with its copies', sender.username, 0],
      ['with a file', sender.username, 1],
    ]);
  }, sent);
  const reads = sent.filter(readsMessages);
  expect(reads).toHaveLength(1);
  expect(reads[0]).toContain('m.id = any(');
});
