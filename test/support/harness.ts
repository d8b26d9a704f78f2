import { afterAll, beforeAll } from 'bun:test';
import { loadConfig, type Config } from '../../src/config';
import type { AgentCacheListener } from '../../src/db/agent-cache';
import type { InboxListener } from '../../src/db/inbox-signal';
import { createAgent } from '../../src/domain/agents/agents';
import type { App } from '../../src/app';
import { silentLogger, type Logger } from '../../src/log';
import { createService, type HttpService } from '../../src/service';
import { createTestDatabase, type TestDatabase } from './database';
import { BY_CLI } from '../../src/domain/people/audit';

export type Reply = { status: number; body: any; headers: Headers };

export type Harness = {
  db: TestDatabase;
  // The service as `ams serve` wires it, on the test database, not listening.
  service: HttpService;
  app: App;
  config: Config;
  inboxSignal: InboxListener;
  agentCache: AgentCacheListener;
  call: (method: string, path: string, opts?: { key?: string; body?: unknown; raw?: string; headers?: Record<string, string> }) => Promise<Reply>;
  agent: (username: string, opts?: { webhookUrl?: string }) => Promise<TestAgent>;
  // Opens a thread as `opener` with the others in it and returns its id.
  thread: (opener: TestAgent, others: TestAgent[], title?: string) => Promise<string>;
  // Posts as `sender` and returns the created-message data.
  post: (sender: TestAgent, threadId: string, content?: string) => Promise<{ id: string; recipients: number }>;
};

export type TestAgent = { username: string; key: string; signingSecret?: string };

// One request through app.handle(), as a client would send it: a JSON body with its length, and
// the answer parsed when it is JSON.
export async function callApp(
  app: App,
  method: string,
  path: string,
  opts: { headers?: Record<string, string>; body?: unknown; raw?: string } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...opts.headers };
  let body: string | undefined = opts.raw;
  if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  if (body !== undefined) headers['content-length'] = String(Buffer.byteLength(body));
  const res = await app.handle(new Request(`http://localhost${path}`, { method, headers, body }));
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {}
  return { status: res.status, body: parsed, headers: res.headers };
}

let counter = 0;
// Unique, valid usernames so tests never collide within a file.
export const uniqueName = (base: string) => `${base}-${++counter}`;

// A fresh database and service for one test file; torn down after the file's tests. The webhook
// worker runs in it only when a test asks for it; its log goes nowhere unless one is given.
export function useHarness(env: Record<string, string> = {}, { worker = false, log = silentLogger as Logger } = {}): Harness {
  const h = {} as Harness;
  let database: Awaited<ReturnType<typeof createTestDatabase>> | undefined;
  beforeAll(async () => {
    database = await createTestDatabase();
    h.config = loadConfig({ WEBHOOK_ALLOW_LOCAL: 'true', DATABASE_URL: database.url, DB_POOL_SIZE: '10', ...env });
    h.service = await createService(h.config, { log, http: true, worker });
    h.db = { sql: h.service.sql, url: database.url, drop: database.drop };
    ({ app: h.app, inboxSignal: h.inboxSignal, agentCache: h.agentCache } = h.service);
    h.call = async (method, path, opts = {}) => {
      const headers: Record<string, string> = { ...opts.headers };
      if (opts.key) headers.authorization = `Bearer ${opts.key}`;
      return callApp(h.app, method, path, { headers, body: opts.body, raw: opts.raw });
    };
    h.agent = async (username, opts = {}) => {
      const created = await createAgent(h.db.sql, BY_CLI, { username, webhookUrl: opts.webhookUrl }, { allowLocal: true });
      return { username, key: created.apiKey, signingSecret: created.signingSecret };
    };
    h.thread = async (opener, others, title = 'A thread') => {
      const res = await h.call('POST', '/api/threads', {
        key: opener.key,
        body: { title, participantUsernames: others.map((o) => o.username) },
      });
      if (res.status !== 201) throw new Error(`open thread failed: ${JSON.stringify(res.body)}`);
      return res.body.data.id;
    };
    h.post = async (sender, threadId, content = 'hello') => {
      const res = await h.call('POST', `/api/threads/${threadId}/messages`, { key: sender.key, body: { content } });
      if (res.status !== 201) throw new Error(`post failed: ${JSON.stringify(res.body)}`);
      return res.body.data;
    };
  });
  afterAll(async () => {
    await h.service?.stop();
    await database?.drop();
  });
  return h;
}

// The harness's app listening on a loopback port, for tests that run real clients (the CLI's) against it.
export function useListening(h: Harness) {
  const at = { port: 0, base: '' };
  beforeAll(() => {
    h.app.listen({ port: 0, hostname: '127.0.0.1' });
    at.port = h.app.server!.port!;
    at.base = `http://127.0.0.1:${at.port}`;
  });
  afterAll(() => h.app.stop(true));
  return at;
}
