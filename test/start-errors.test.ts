import { afterAll, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { track } from './support/children';
import { freePort } from './support/ports';

// The real process, started wrongly: it must say what is wrong in one sentence, as the first line
// it logs, and exit with 1, never print a stack, a source listing or a TypeError of its own.
const dataDir = mkdtempSync(join(tmpdir(), 'ams-start-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

type Line = Record<string, unknown>;

async function start(env: Record<string, string>) {
  const proc = Bun.spawn(['bun', 'src/main.ts', 'serve'], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const [code, stdout, stderr] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  const lines = stderr.split('\n').filter((l) => l !== '');
  // Every line should be a JSON log line, whose time is the only field a test cannot know; any
  // other line is kept as it is, so that a failure shows it.
  const parsed = lines.map((l): Line => {
    try {
      const { time: _, ...rest } = JSON.parse(l) as Line;
      return rest;
    } catch {
      return { unparsed: l };
    }
  });
  return { code, stdout, lines: parsed };
}

// A plain TCP listener, which is not PostgreSQL, on a port of its own.
async function listener(): Promise<Server> {
  const server = createServer(() => {});
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  return server;
}
const portOf = (server: Server) => (server.address() as { port: number }).port;

test('a configuration value that is not valid names the variable and what it must be', async () => {
  const { code, stdout, lines } = await start({ PORT: 'abc', DATABASE_URL: process.env.DATABASE_URL ?? '' });
  expect(lines[0]).toEqual({ level: 'error', event: 'start_failed', error: 'PORT must be a whole number from 0 to 65535.' });
  expect(lines).toHaveLength(1);
  expect(stdout).toBe('');
  expect(code).toBe(1);
});

test('a DATABASE_URL where nothing listens names the address and says so', async () => {
  const port = await freePort();
  const { code, stdout, lines } = await start({ DATABASE_URL: `postgres://ams:secret@127.0.0.1:${port}/ams` });
  expect(lines[0]).toEqual({
    level: 'error',
    event: 'start_failed',
    error: `Could not connect to PostgreSQL at 127.0.0.1:${port} (DATABASE_URL): nothing is listening on that port.`,
  });
  expect(lines).toHaveLength(1);
  expect(stdout).toBe('');
  expect(code).toBe(1);
});

// Its own PostgreSQL, never the shared one: DATABASE_URL is unset and the data goes to a temporary
// folder, on a port that a plain TCP listener holds.
test('an embedded PostgreSQL port taken by another program is named, with PostgreSQL’s last log lines', async () => {
  const squatter = await listener();
  const port = portOf(squatter);
  try {
    const { code, stdout, lines } = await start({ DATABASE_URL: '', DATA_DIR: dataDir, EMBEDDED_PG_PORT: String(port) });
    // The data folder is new, so it is initialised before the server is started.
    expect(lines[0]).toEqual({ level: 'info', event: 'embedded_postgres_init', databaseDir: join(dataDir, 'postgres') });
    const { postgresLog, ...failed } = lines[1]!;
    expect(failed).toEqual({
      level: 'error',
      event: 'start_failed',
      error: `The embedded PostgreSQL could not start: port ${port} (EMBEDDED_PG_PORT) is taken by another program.`,
    });
    expect(postgresLog).toContainEqual(expect.stringContaining('could not bind IPv4 address "127.0.0.1": Address already in use'));
    expect(lines).toHaveLength(2);
    expect(stdout).toBe('');
    expect(code).toBe(1);
  } finally {
    squatter.close();
  }
}, 60_000);

// The lock file a PostgreSQL keeps in its data folder names a process that is alive, but nothing
// answers at the port it names (a cluster still starting, or stuck): DATA_DIR is named, rather than
// the second start's own failure.
test('a PostgreSQL that holds DATA_DIR but does not answer is named, with DATA_DIR', async () => {
  const held = mkdtempSync(join(tmpdir(), 'ams-held-'));
  const holder = track(Bun.spawn(['sleep', '60'], { stdin: 'ignore', stdout: 'ignore', stderr: 'ignore' }));
  try {
    const [lockPort, ownPort] = [await freePort(), await freePort()];
    mkdirSync(join(held, 'postgres'));
    writeFileSync(join(held, 'postgres', 'PG_VERSION'), '18\n');
    writeFileSync(join(held, 'postgres', 'postmaster.pid'), `${holder.pid}\n${join(held, 'postgres')}\n1764300000\n${lockPort}\n/tmp\n127.0.0.1\n`);
    const { code, stdout, lines } = await start({ DATABASE_URL: '', DATA_DIR: held, EMBEDDED_PG_PORT: String(ownPort) });
    const { postgresLog: _, ...failed } = lines[0]!;
    expect(failed).toEqual({
      level: 'error',
      event: 'start_failed',
      error:
        `The embedded PostgreSQL could not start: process ${holder.pid} already runs a PostgreSQL on ${join(held, 'postgres')} (DATA_DIR), ` +
        `on port ${lockPort}, which does not answer; stop it, or set DATA_DIR to another folder.`,
    });
    expect([lines.length, stdout, code]).toEqual([1, '', 1]);
  } finally {
    holder.kill();
    rmSync(held, { recursive: true, force: true });
  }
}, 60_000);
