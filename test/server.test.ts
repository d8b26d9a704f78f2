import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './support/ports';

// The real executable path: `bun src/main.ts` with no DATABASE_URL starts its own PostgreSQL
// under DATA_DIR, keeps the data across restarts, and stops cleanly on SIGTERM.
const dataDir = mkdtempSync(join(tmpdir(), 'ams-server-'));
const env = {
  ...process.env,
  DATABASE_URL: '',
  DATA_DIR: dataDir,
  EMBEDDED_PG_PORT: String(await freePort()),
  PORT: '0',
  HOST: '127.0.0.1',
};
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

type Server = { url: string; log: () => string; stop: () => Promise<void> };

// Starts the server, reading its log throughout so that a failure can show it.
async function start(): Promise<Server> {
  const proc = Bun.spawn(['bun', 'src/main.ts'], { env, stdout: 'ignore', stderr: 'pipe', stdin: 'ignore' });
  let log = '';
  const drained = (async () => {
    for await (const chunk of proc.stderr) log += new TextDecoder().decode(chunk);
  })();
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const match = /"event":"listening","url":"http:\/\/[^:]+:(\d+)"/.exec(log);
    if (match) {
      return {
        url: `http://127.0.0.1:${match[1]}`,
        log: () => log,
        stop: async () => {
          proc.kill('SIGTERM');
          const code = await proc.exited;
          await drained;
          if (code !== 0) throw new Error(`server exited with ${code}:\n${log}`);
          expect(log).toContain('"event":"stopped"');
        },
      };
    }
    if (proc.exitCode !== null) break;
    await Bun.sleep(50);
  }
  proc.kill();
  throw new Error(`server did not start:\n${log}`);
}

const cli = (args: string[], extra: Record<string, string> = {}) => {
  const out = Bun.spawnSync(['bun', 'src/main.ts', ...args], { env: { ...env, ...extra } });
  if (out.exitCode !== 0) throw new Error(out.stderr.toString());
  return JSON.parse(out.stdout.toString());
};

test('starts on embedded PostgreSQL, keeps data across a restart, stops on SIGTERM', async () => {
  const first = await start();
  expect(await (await fetch(`${first.url}/health`)).json()).toEqual({ success: true, data: { status: 'ok' } });
  // The CLI finds the embedded server already running and shares it.
  const { apiKey } = cli(['agents', 'create', 'survivor']);
  const opened = await fetch(`${first.url}/api/threads`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ title: 'Kept' }),
  });
  expect(opened.status).toBe(201);
  await first.stop();

  const second = await start();
  // A person watching the dashboard's live feed must not hold up the shutdown.
  cli(['people', 'invite', 'ada@example.com', 'ada']);
  const dash = (path: string, body: unknown) =>
    fetch(`${second.url}/dashboard/api${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-requested-with': 'fetch' },
      body: JSON.stringify(body),
    });
  expect((await dash('/sign-in/code', { email: 'ada@example.com' })).status).toBe(200);
  const code = /"event":"sign_in_code","email":"ada@example.com","code":"(\d+)"/.exec(second.log())![1];
  const signedIn = await dash('/sign-in/verify', { email: 'ada@example.com', code });
  const cookie = signedIn.headers.get('set-cookie')!.split(';')[0]!;
  const events = await fetch(`${second.url}/dashboard/api/deliveries/events`, { headers: { cookie } });
  expect(events.status).toBe(200);
  const reader = events.body!.getReader();
  expect(new TextDecoder().decode((await reader.read()).value)).toContain('event: ready');
  const res = await fetch(`${second.url}/api/threads`, { headers: { authorization: `Bearer ${apiKey}` } });
  const threads = (await res.json()) as { data: { title: string }[] };
  expect(threads.data.map((t) => t.title)).toEqual(['Kept']);
  await second.stop();
}, 120_000);

// The server was started with its own EMBEDDED_PG_PORT, the CLI is run without it (or with another):
// the CLI finds the PostgreSQL the server runs under DATA_DIR, at its real port, instead of trying to
// start a second one on the same data.
test('the CLI shares the server\'s embedded PostgreSQL whatever EMBEDDED_PG_PORT it is given', async () => {
  const server = await start();
  try {
    const { apiKey } = cli(['agents', 'create', 'elsewhere'], { EMBEDDED_PG_PORT: String(await freePort()) });
    const res = await fetch(`${server.url}/api/threads`, { headers: { authorization: `Bearer ${apiKey}` } });
    expect(res.status).toBe(200);
  } finally {
    await server.stop();
  }
}, 120_000);
