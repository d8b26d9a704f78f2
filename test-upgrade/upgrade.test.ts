import { afterAll, beforeAll, expect, test } from 'bun:test';
import type { Subprocess } from 'bun';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { track } from '../test/support/children';
import { createTestDatabase, type TestDatabase } from '../test/support/database';
import { emptyDatabase } from '../test/support/empty-database';
import { freePort } from '../test/support/ports';
import { eventually, receiver } from '../test/support/receiver';
import { previousRelease, ROOT } from '../test/support/releases';

// An upgrade as a small team does it: the previous release serves on its own schema; the new
// version starts beside it on the same database (applying its migrations while the old one
// serves); both serve and ring doorbells together; then the old one stops. At every stage the
// walkthrough runs end to end through each version and across them, with the old version's own
// code, CLI included; an old process also restarts on the new schema, as one would mid-rollout. The previous release is the one CHANGELOG.md names, checked out from git
// and installed from its own lockfile.
const release = previousRelease();
const hook = receiver();
// Quick retries and heartbeats; small pools, as two versions share the test server's connections.
const FAST = { WEBHOOK_RETRY_DELAYS_MS: '100,200,300', WORKER_HEARTBEAT_MS: '200', WORKER_STALE_MS: '1000', DB_POOL_SIZE: '5', WEBHOOK_CONCURRENCY: '4' };

type Version = { name: string; dir: string };
type Instance = { version: Version; base: string; proc: Subprocess<'ignore', 'ignore', 'pipe'>; lines: () => Record<string, unknown>[] };
type Agent = { username: string; apiKey: string; signingSecret: string };

const previous: Version = { name: `previous release ${release.version}`, dir: mkdtempSync(join(tmpdir(), 'ams-previous-')) };
const next: Version = { name: 'this version', dir: ROOT };
let server: { url: string; drop: () => Promise<void> };
let db: TestDatabase;

beforeAll(async () => {
  const unpacked = Bun.spawnSync(['sh', '-c', `git archive ${release.commit} | tar -x -C '${previous.dir}'`], { cwd: ROOT, stderr: 'pipe' });
  if (unpacked.exitCode !== 0) throw new Error(`could not check out ${release.commit}: ${unpacked.stderr}`);
  const installed = Bun.spawnSync(['bun', 'install', '--frozen-lockfile', '--ignore-scripts'], { cwd: previous.dir, stdout: 'pipe', stderr: 'pipe' });
  if (installed.exitCode !== 0) throw new Error(`bun install of ${release.version} failed: ${installed.stderr}`);
  server = await createTestDatabase();
  db = await emptyDatabase(server.url);
}, 180_000);

afterAll(async () => {
  await db?.drop();
  await server?.drop();
  rmSync(previous.dir, { recursive: true, force: true });
});

const env = (port: number) => ({
  ...process.env,
  ...FAST,
  DATABASE_URL: db.url,
  WEBHOOK_ALLOW_LOCAL: 'true',
  HOST: '127.0.0.1',
  PORT: String(port),
  LOG_LEVEL: 'info',
});

async function start(version: Version): Promise<Instance> {
  const port = await freePort();
  const proc = track(Bun.spawn(['bun', 'src/main.ts', 'serve'], { cwd: version.dir, env: env(port), stdin: 'ignore', stdout: 'ignore', stderr: 'pipe' }));
  const lines: Record<string, unknown>[] = [];
  const ready = Promise.withResolvers<void>();
  void (async () => {
    let buffered = '';
    for await (const chunk of proc.stderr) {
      buffered += new TextDecoder().decode(chunk);
      for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
        const text = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        let line: Record<string, unknown>;
        try {
          line = JSON.parse(text);
        } catch {
          line = { level: 'error', event: 'not_json', text };
        }
        lines.push(line);
        if (line.event === 'listening') ready.resolve();
      }
    }
    ready.reject(new Error(`the ${version.name} exited before it listened: ${JSON.stringify(lines)}`));
  })();
  const timer = setTimeout(() => ready.reject(new Error(`the ${version.name} did not listen within 60 s`)), 60_000);
  await ready.promise.finally(() => clearTimeout(timer));
  return { version, base: `http://127.0.0.1:${port}`, proc, lines: () => lines };
}

async function stop(instance: Instance) {
  instance.proc.kill('SIGTERM');
  expect(await instance.proc.exited).toBe(0);
}

// The admin CLI of a version, on the shared database.
function cli(version: Version, ...args: string[]) {
  const out = Bun.spawnSync(['bun', 'src/main.ts', ...args], { cwd: version.dir, env: env(0), stdout: 'pipe', stderr: 'pipe' });
  if (out.exitCode !== 0) throw new Error(`${version.name}: ams ${args.join(' ')} failed: ${out.stderr}`);
  return JSON.parse(out.stdout.toString());
}

async function call(instance: Instance, method: string, path: string, key: string, body?: unknown) {
  const res = await fetch(instance.base + path, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}

let conversations = 0;

// The walkthrough: the sender opens a thread through one instance and posts; the recipient's
// webhook gets a doorbell it can verify, whichever worker rang it; the recipient reports it,
// reads the message and acknowledges it through another instance; the sender's receipt says read.
async function converse(from: Instance, to: Instance, sender: Agent, recipient: Agent) {
  const title = `Upgrade check ${++conversations}: ${from.version.name} to ${to.version.name}`;
  const content = `Posted through the ${from.version.name}, read through the ${to.version.name}.`;
  const opened = await call(from, 'POST', '/api/threads', sender.apiKey, { title, participantUsernames: [recipient.username] });
  expect(opened.status).toBe(201);
  const threadId = opened.body.data.id as string;
  const posted = await call(from, 'POST', `/api/threads/${threadId}/messages`, sender.apiKey, { content });
  expect([posted.status, posted.body.data.recipients]).toEqual([201, 1]);

  // This message's doorbell, however many others (a retry of an earlier one, say) arrive meanwhile.
  const ours = () => hook.received.find((r) => r.raw.includes(`"messageId":"${posted.body.data.id}"`));
  const doorbell = await eventually(async () => ours(), 10_000);
  const payload = new Webhook(recipient.signingSecret).verify(doorbell.raw, Object.fromEntries(doorbell.headers)) as any;
  expect(payload).toEqual({
    event: 'message.created',
    data: {
      deliveryId: expect.any(String),
      messageId: posted.body.data.id,
      threadId,
      threadTitle: title,
      sender: sender.username,
      summary: content.slice(0, 120),
    },
  });
  const deliveryId = payload.data.deliveryId as string;

  const reported = await call(to, 'POST', `/api/deliveries/${deliveryId}/delivered`, recipient.apiKey);
  expect(reported.status).toBe(200);
  const inbox = await call(to, 'GET', '/api/deliveries', recipient.apiKey);
  expect([inbox.status, inbox.body.data.map((e: { deliveryId: string }) => e.deliveryId)]).toEqual([200, [deliveryId]]);
  const read = await call(to, 'GET', `/api/threads/${threadId}/messages`, recipient.apiKey);
  expect([read.status, read.body.data.map((m: { content: string }) => m.content)]).toEqual([200, [content]]);
  const acknowledged = await call(to, 'POST', `/api/deliveries/${deliveryId}/acknowledge`, recipient.apiKey);
  expect(acknowledged.status).toBe(200);
  expect((await call(to, 'GET', '/api/deliveries', recipient.apiKey)).body.data).toEqual([]);

  const receipt = await call(from, 'GET', `/api/messages/${posted.body.data.id}/deliveries?waitFor=fetched&wait=10`, sender.apiKey);
  expect([receipt.status, receipt.body.data.reached, receipt.body.data.recipients.map((r: { username: string; step: string }) => [r.username, r.step])]).toEqual([
    200,
    true,
    [[recipient.username, 'fetched']],
  ]);
}

const faults = (instance: Instance) => instance.lines().filter((line) => line.level === 'error');

test(`the previous release keeps working while this version upgrades its database, and after`, async () => {
  const old = await start(previous);
  const alice: Agent = cli(previous, 'agents', 'create', 'alice', '--webhook', hook.url('/alice'));
  const bob: Agent = cli(previous, 'agents', 'create', 'bob', '--webhook', hook.url('/bob'));
  await converse(old, old, alice, bob);

  // The new version starts on the same database and migrates it while the old one serves.
  const fresh = await start(next);
  await converse(old, old, bob, alice);
  await converse(old, fresh, alice, bob);
  await converse(fresh, old, bob, alice);
  await converse(fresh, fresh, alice, bob);
  // The old version's CLI, on the new schema, makes agents both versions serve.
  const carol: Agent = cli(previous, 'agents', 'create', 'carol', '--webhook', hook.url('/carol'));
  await converse(fresh, old, alice, carol);
  const dave: Agent = cli(next, 'agents', 'create', 'dave', '--webhook', hook.url('/dave'));
  await converse(old, fresh, dave, carol);
  // An agent the previous release made, before the upgrade or during it, keeps its one key,
  // unchanged, as the first of its keys.
  for (const agent of [alice, carol]) {
    const keys = await call(fresh, 'GET', '/api/agents/me/keys', agent.apiKey);
    expect([keys.status, keys.body.data.map((k: { name: string; expiresAt: null; current: boolean }) => [k.name, k.expiresAt, k.current])]).toEqual([
      200,
      [['initial', null, true]],
    ]);
  }
  // An agent rotates its key through this version while the old one still serves: the old version
  // refuses the revoked key too. It knows only the key an agent was created with, so the new key
  // answers through this version alone until the old one is gone.
  const erin: Agent = cli(next, 'agents', 'create', 'erin', '--webhook', hook.url('/erin'));
  const rotated = await call(fresh, 'POST', '/api/agents/me/keys', erin.apiKey, { name: 'rotated' });
  expect(rotated.status).toBe(201);
  const [initial] = (await call(fresh, 'GET', '/api/agents/me/keys', erin.apiKey)).body.data;
  expect((await call(fresh, 'DELETE', `/api/agents/me/keys/${initial.id}`, rotated.body.data.apiKey)).status).toBe(200);
  for (const instance of [fresh, old]) expect((await call(instance, 'GET', '/api/threads', erin.apiKey)).status).toBe(401);
  expect((await call(fresh, 'GET', '/api/threads', rotated.body.data.apiKey)).status).toBe(200);

  // An old process that restarts mid-rollout (or a rollback) starts on the new schema, and works.
  await stop(old);
  const restarted = await start(previous);
  await converse(restarted, fresh, carol, dave);
  await converse(fresh, restarted, dave, alice);

  // The old version leaves cleanly; what it wrote, the new one serves on its own.
  await stop(restarted);
  await converse(fresh, fresh, carol, alice);
  // People's rules are as the deployment had them before: every agent open to everyone, nothing
  // held (every post above answered 201), nothing paused.
  for (const agent of [alice, bob, carol, dave]) {
    expect(await call(fresh, 'GET', '/api/agents/me/contact-policy', agent.apiKey)).toEqual({
      status: 200,
      body: { success: true, data: { policy: 'open', allow: [], block: [] } },
    });
  }
  await stop(fresh);
  expect([faults(old), faults(restarted), faults(fresh)]).toEqual([[], [], []]);
}, 180_000);
