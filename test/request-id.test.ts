import { expect, test } from 'bun:test';
import { buildApp } from '../src/app';
import { internalError } from '../src/web/envelope';
import { createLogger } from '../src/log';
import { callApp, uniqueName, useHarness } from './support/harness';

// Every answer names its request, and so does every log line written for it, so that an
// operator can match a client's report to the log.
const h = useHarness();
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

function appWithLog() {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger('debug', (line) => lines.push(JSON.parse(line)));
  const app = buildApp({ sql: h.db.sql, config: h.config, log, inboxSignal: h.inboxSignal, agentCache: h.agentCache });
  return { app, lines };
}

test('every answer carries a generated request id, whoever answers it', async () => {
  const a = await h.agent(uniqueName('ids'));
  const answers = [
    await h.call('GET', '/api/threads', { key: a.key }),
    await h.call('GET', '/api/threads'),
    await h.call('GET', '/api/no-such-route', { key: a.key }),
    await h.call('GET', '/api/threads/%00', { key: a.key }),
    await h.call('POST', '/api/threads', { key: a.key, raw: 'x'.repeat(h.config.BODY_LIMIT_BYTES + 1) }),
    await h.call('POST', '/mcp', { key: a.key, body: { jsonrpc: '2.0', id: 1, method: 'tools/list' }, headers: { accept: 'application/json, text/event-stream' } }),
    await h.call('GET', '/health'),
  ];
  expect(answers.map((r) => r.status)).toEqual([200, 401, 404, 400, 413, 200, 200]);
  const ids = answers.map((r) => r.headers.get('x-request-id'));
  for (const id of ids) expect(id).toMatch(UUID_V7);
  expect(new Set(ids).size).toBe(ids.length);
});

test("a client's own sane id is kept; anything else is replaced, never refused", async () => {
  const a = await h.agent(uniqueName('ids'));
  const sent = (id: string) => h.call('GET', '/api/threads', { key: a.key, headers: { 'x-request-id': id } });
  for (const kept of ['req-42', 'a.b:c/d+e=f@g_h', 'x'.repeat(128)]) {
    const reply = await sent(kept);
    expect([reply.status, reply.headers.get('x-request-id')]).toEqual([200, kept]);
  }
  for (const replaced of ['has space', 'x'.repeat(129), 'quote"d', 'semi;colon', '<script>']) {
    const reply = await sent(replaced);
    expect(reply.status).toBe(200);
    expect(reply.headers.get('x-request-id')).toMatch(UUID_V7);
  }
});

test('a 500 quotes its request id, and the logged fault carries the same id', async () => {
  const { app, lines } = appWithLog();
  const a = await h.agent(uniqueName('ids'));
  await h.db.sql`alter table threads rename to threads_away`;
  try {
    const reply = await callApp(app, 'GET', '/api/threads', { headers: { authorization: `Bearer ${a.key}`, 'x-request-id': 'support-ticket-7' } });
    expect(reply.status).toBe(500);
    expect(reply.headers.get('x-request-id')).toBe('support-ticket-7');
    expect(reply.body).toEqual({ success: false, error: internalError('support-ticket-7') });
    expect(reply.body.error).toBe('Internal server error (request id support-ticket-7); nothing about the request will fix it.');
  } finally {
    await h.db.sql`alter table threads_away rename to threads`;
  }
  const failed = lines.filter((l) => l.event === 'request_failed');
  expect(failed).toHaveLength(1);
  expect(failed[0]).toMatchObject({ level: 'error', requestId: 'support-ticket-7', method: 'GET', path: '/api/threads' });
  expect(String(failed[0]!.error)).toContain('threads');
});

test("a caller's W3C traceparent puts its trace and span ids on the request's log lines, at any door; a malformed one is ignored", async () => {
  const a = await h.agent(uniqueName('traced'));
  const { app, lines } = appWithLog();
  const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
  const made = await callApp(app, 'POST', '/api/agents/me/keys', { headers: { authorization: `Bearer ${a.key}`, traceparent }, body: { name: 'traced' } });
  expect(made.status).toBe(201);
  expect(lines.findLast((l) => l.event === 'agent_key_created')).toMatchObject({
    requestId: made.headers.get('x-request-id'),
    traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
    parentSpanId: '00f067aa0ba902b7',
  });
  for (const malformed of ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7', 'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`]) {
    const again = await callApp(app, 'POST', '/api/agents/me/keys', { headers: { authorization: `Bearer ${a.key}`, traceparent: malformed }, body: { name: `t${lines.length}` } });
    expect(again.status).toBe(201);
    expect(lines.findLast((l) => l.event === 'agent_key_created')).not.toHaveProperty('traceId');
  }
});
