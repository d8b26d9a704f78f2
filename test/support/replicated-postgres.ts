import type { Subprocess } from 'bun';
import { chmodSync, chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { track } from './children';
import { childrenOf, postgresUser } from './debian-postgres';
import { freePort } from './ports';

// A primary and a streaming standby made from it with pg_basebackup, both Debian's PostgreSQL 15
// (/usr/lib/postgresql/15), as a replica or a failover pair is run in production: two servers,
// the standby replaying the primary's WAL. With `synchronous`, the primary's commits wait until
// the standby has them (synchronous_standby_names; synchronous_commit is on by default), so that a commit
// acknowledged by the primary survives the primary.
export type PgServer = {
  port: number;
  // The `ams` database on this server.
  url: string;
  // The server's own processes: a backend serving `application_name`, say.
  query: <T extends Record<string, unknown>>(text: string) => Promise<T[]>;
  // Stops it as an operator would (a fast shutdown).
  stop: () => Promise<void>;
  // The machine dies: the server and every backend killed at once, nothing flushed or said.
  kill9: () => Promise<void>;
  start: () => Promise<void>;
  // Makes a standby the primary (pg_ctl promote), once it has replayed what it received.
  promote: () => Promise<void>;
};

export type ReplicatedPair = { primary: PgServer; standby: PgServer; stop: () => Promise<void> };

const MAJOR = 15;
const BIN = `/usr/lib/postgresql/${MAJOR}/bin`;
const STANDBY_NAME = 'standby';

export async function replicatedPair({ synchronous }: { synchronous: boolean }): Promise<ReplicatedPair> {
  if (!existsSync(`${BIN}/postgres`)) {
    throw new Error(`PostgreSQL ${MAJOR}'s server is not installed at ${BIN}: apt-get install -y postgresql-${MAJOR} (Debian ships it there).`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'ams-replicated-'));
  if (asPostgres.length > 0) {
    chmodSync(dir, 0o700);
    const { uid, gid } = postgresUser();
    chownSync(dir, uid, gid);
  }
  const [primaryPort, standbyPort] = [await serverPort(), await serverPort()];
  run([`${BIN}/initdb`, '-D', join(dir, 'primary'), '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8', '--no-sync']);
  const primary = server(dir, 'primary', primaryPort, []);
  await primary.start();
  await admin(primaryPort, (sql) => sql`create database ams`);
  run([`${BIN}/pg_basebackup`, '-D', join(dir, 'standby'), '-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres', '-X', 'stream', '-R', '-c', 'fast']);
  // The name the primary knows it by, for synchronous_standby_names.
  const standby = server(dir, 'standby', standbyPort, [`primary_conninfo=host=127.0.0.1 port=${primaryPort} user=postgres application_name=${STANDBY_NAME}`]);
  await standby.start();
  // Only now: a synchronous primary with no standby yet would hold every commit, its own set-up's too.
  if (synchronous) {
    await primary.query(`alter system set synchronous_standby_names = '${STANDBY_NAME}'`);
    await primary.query('select pg_reload_conf()');
  }
  const syncState = synchronous ? 'sync' : 'async';
  await until(
    () => primary.query<{ n: number }>(`select count(*)::int as n from pg_stat_replication where state = 'streaming' and sync_state = '${syncState}'`),
    (rows) => rows[0]!.n === 1,
    `the standby did not stream (${syncState}) from the primary`,
  );
  return {
    primary,
    standby,
    stop: async () => {
      await Promise.all([primary.stop(), standby.stop()]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// PostgreSQL refuses to run as root: as root, the servers are the postgres user's.
const asPostgres = process.getuid?.() === 0 ? ['setpriv', '--reuid=postgres', '--regid=postgres', '--init-groups', '--'] : [];

function run(command: string[]) {
  const done = Bun.spawnSync([...asPostgres, ...command], { stdout: 'pipe', stderr: 'pipe' });
  if (done.exitCode !== 0) throw new Error(`${command[0]} failed: ${done.stderr.toString()}`);
}

function server(dir: string, name: string, port: number, settings: string[]): PgServer {
  const data = join(dir, name);
  let proc: Subprocess | null = null;
  const url = `postgres://postgres@127.0.0.1:${port}/ams`;
  const self: PgServer = {
    port,
    url,
    query: (text) => admin(port, (sql) => sql.unsafe(text)) as never,
    start: async () => {
      // fsync off: a killed server's writes are in the kernel's cache all the same; only the
      // machine itself going down would lose them, and no test takes it down.
      const flags = ['listen_addresses=127.0.0.1', `unix_socket_directories=${dir}`, 'shared_buffers=16MB', 'max_connections=200', 'fsync=off', ...settings];
      proc = track(
        Bun.spawn([...asPostgres, `${BIN}/postgres`, '-D', data, '-p', String(port), ...flags.flatMap((flag) => ['-c', flag])], {
          stdout: 'ignore',
          stderr: 'ignore',
        }),
      );
      const started = proc;
      await until(
        () => admin(port, (sql) => sql`select 1`).then(() => true, () => false),
        (up) => up || started.exitCode !== null,
        `PostgreSQL (${name}) did not start`,
      );
      if (started.exitCode !== null) throw new Error(`PostgreSQL (${name}) exited at its start (${started.exitCode})`);
    },
    stop: async () => {
      if (!proc || proc.exitCode !== null) return;
      proc.kill('SIGINT');
      await proc.exited;
    },
    kill9: async () => {
      if (!proc) return;
      const backends = childrenOf(proc.pid);
      proc.kill('SIGKILL');
      for (const pid of backends) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {}
      }
      await proc.exited;
    },
    promote: async () => run([`${BIN}/pg_ctl`, 'promote', '-w', '-D', data]),
  };
  return self;
}

async function admin<T>(port: number, use: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  const sql = postgres(`postgres://postgres@127.0.0.1:${port}/postgres`, { max: 1, connect_timeout: 2, onnotice: () => {} });
  try {
    return await use(sql);
  } finally {
    await sql.end({ timeout: 1 });
  }
}

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, failure: string, timeoutMs = 30_000) {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (done(await read())) return;
    if (performance.now() > deadline) throw new Error(`${failure} within ${timeoutMs / 1000} s`);
    await Bun.sleep(50);
  }
}

// Ports for servers of their own: the kernel's pick, or, where several runs share a machine and
// each is given a range (TEST_SERVER_PORTS=55440-55449), the next free one of that range.
const taken = new Set<number>();
async function serverPort(): Promise<number> {
  const range = /^(\d+)-(\d+)$/.exec(process.env.TEST_SERVER_PORTS ?? '');
  if (!range) return freePort();
  for (let port = Number(range[1]); port <= Number(range[2]); port++) {
    if (taken.has(port) || !(await isFree(port))) continue;
    taken.add(port);
    return port;
  }
  throw new Error(`No free port left in TEST_SERVER_PORTS (${process.env.TEST_SERVER_PORTS}).`);
}

const isFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
