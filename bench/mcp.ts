// `bun bench/mcp.ts` (or `BENCH_ONLY=mcp bun run bench`): what a tool call costs over MCP against
// the same read over the HTTP API, for both protocol versions /mcp speaks, in one run on a fresh
// database with the service in its own process (bench/server.ts).
// The same thread read three ways, one request at a time: GET /api/threads/:id, tools/call
// get_thread in 2025-11-25 (the v1 SDK's server) and in 2026-07-28 (the v2 SDK's server). Rounds
// alternate the three, MCP_RUNS times (default 3) MCP_CALLS calls each (default 2 000), after one
// untimed round; each figure is the median round's mean, in ms per call.
import { connect } from '../src/db/connect';
import { createAgent } from '../src/domain/agents/agents';
import { BY_CLI } from '../src/domain/people/audit';
import { freshDatabases } from './fresh-database';
import { median, round } from './stats';
import { listeningPort } from './instance';

const runs = Number(process.env.MCP_RUNS ?? 3);
const calls = Number(process.env.MCP_CALLS ?? 2_000);
const root = new URL('..', import.meta.url).pathname;
const progress = (line: string) => process.stderr.write(`${line}\n`);

const db = await freshDatabases();
const server = Bun.spawn(['bun', 'bench/server.ts'], {
  cwd: root,
  env: { ...process.env, DATABASE_URL: db.url, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'warn', WEBHOOK_ALLOW_LOCAL: 'true' },
  stdout: 'pipe',
  stderr: 'inherit',
});
try {
  const base = `http://127.0.0.1:${(await listeningPort(server.stdout, 'the service ended before it listened')).port}`;
  const json = (key: string, extra: Record<string, string> = {}) => ({
    authorization: `Bearer ${key}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    ...extra,
  });
  const sql = connect(db.url, 1);
  const key = (await createAgent(sql, BY_CLI, { username: 'mcp-bench' }, { allowLocal: true })).apiKey;
  await createAgent(sql, BY_CLI, { username: 'mcp-bench-other' }, { allowLocal: true });
  await sql.end();
  const opened = await fetch(`${base}/api/threads`, { method: 'POST', headers: json(key), body: JSON.stringify({ title: 'Bench', participantUsernames: ['mcp-bench-other'] }) });
  const threadId = ((await opened.json()) as { data: { id: string } }).data.id;

  const call = { name: 'get_thread', arguments: { threadId } };
  const ways: Record<string, () => Promise<Response>> = {
    http: () => fetch(`${base}/api/threads/${threadId}`, { headers: { authorization: `Bearer ${key}` } }),
    mcp2025: () =>
      fetch(`${base}/mcp`, {
        method: 'POST',
        headers: json(key, { 'mcp-protocol-version': '2025-11-25' }),
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: call }),
      }),
    mcp2026: () =>
      fetch(`${base}/mcp`, {
        method: 'POST',
        headers: json(key, { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'get_thread' }),
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: {
            ...call,
            _meta: {
              'io.modelcontextprotocol/protocolVersion': '2026-07-28',
              'io.modelcontextprotocol/clientInfo': { name: 'bench', version: '1.0.0' },
              'io.modelcontextprotocol/clientCapabilities': {},
            },
          },
        }),
      }),
  };
  // Each way answers the thread, or the bench is measuring a refusal.
  for (const [name, way] of Object.entries(ways)) {
    const text = await (await way()).text();
    if (!text.includes(threadId) || text.includes('"isError":true')) throw new Error(`${name} did not answer the thread: ${text.slice(0, 300)}`);
  }
  // A first round untimed: each way's code compiled and its statements' plans made.
  for (const way of Object.values(ways)) for (let i = 0; i < calls; i++) await (await way()).arrayBuffer();
  const perCall: Record<string, number[]> = { http: [], mcp2025: [], mcp2026: [] };
  for (let r = 0; r < runs; r++) {
    for (const [name, way] of Object.entries(ways)) {
      const started = performance.now();
      for (let i = 0; i < calls; i++) await (await way()).arrayBuffer();
      perCall[name]!.push((performance.now() - started) / calls);
    }
    progress(`run ${r + 1}: ${Object.entries(perCall).map(([name, ms]) => `${name} ${round(ms.at(-1)!, 3)} ms`).join(', ')}`);
  }
  const ms = Object.fromEntries(Object.entries(perCall).map(([name, samples]) => [name, round(median(samples), 3)]));
  console.log(
    JSON.stringify({
      calls,
      runs,
      msPerCall: ms,
      againstHttp: { mcp2025: round(ms.mcp2025! / ms.http!, 2), mcp2026: round(ms.mcp2026! / ms.http!, 2) },
    }),
  );
} finally {
  server.kill('SIGTERM');
  await server.exited;
  await db.drop();
}
