import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { track } from './children';

// PgBouncer as Debian packages it (.ci/run installs it), started in transaction mode in front of
// one database, as a deployment runs it: the service reaches `url`, PgBouncer opens at most
// `poolSize` connections to PostgreSQL for all its clients.
export const PGBOUNCER = '/usr/sbin/pgbouncer';

export type PgBouncer = { url: string; pid: number; stop: () => Promise<void>; log: () => string };

// `ignoreStartupParameters`: those PgBouncer is told to drop rather than refuse.
export async function startPgBouncer(
  databaseUrl: string,
  { port, poolSize = 5, ignoreStartupParameters = [] }: { port: number; poolSize?: number; ignoreStartupParameters?: string[] },
): Promise<PgBouncer> {
  if (!existsSync(PGBOUNCER)) throw new Error(`No PgBouncer at ${PGBOUNCER}: apt-get install pgbouncer (.ci/run does).`);
  const target = new URL(databaseUrl);
  const database = target.pathname.slice(1);
  const dir = mkdtempSync(join(tmpdir(), 'ams-pgbouncer-'));
  // PgBouncer will not run as root; as root it is told to become the user the embedded PostgreSQL
  // runs as, who must read its files.
  chmodSync(dir, 0o755);
  const config = join(dir, 'pgbouncer.ini');
  writeFileSync(join(dir, 'users.txt'), `"${decodeURIComponent(target.username)}" ""\n`);
  writeFileSync(
    config,
    [
      '[databases]',
      `${database} = host=${target.hostname} port=${target.port || 5432} dbname=${database} user=${decodeURIComponent(target.username)} password=${decodeURIComponent(target.password)}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      // Clients are trusted on loopback; PgBouncer logs in to PostgreSQL with the password above.
      'auth_type = trust',
      `auth_file = ${join(dir, 'users.txt')}`,
      'pool_mode = transaction',
      `default_pool_size = ${poolSize}`,
      'max_client_conn = 500',
      ...(ignoreStartupParameters.length > 0 ? [`ignore_startup_parameters = ${ignoreStartupParameters.join(',')}`] : []),
      ...(process.getuid?.() === 0 ? ['user = postgres'] : []),
      '',
    ].join('\n'),
  );
  for (const file of ['users.txt', 'pgbouncer.ini']) chmodSync(join(dir, file), 0o644);
  const proc = track(Bun.spawn([PGBOUNCER, config], { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }));
  let text = '';
  const ready = Promise.withResolvers<void>();
  const read = async (stream: ReadableStream<Uint8Array>) => {
    const decoder = new TextDecoder();
    for await (const chunk of stream) {
      text += decoder.decode(chunk, { stream: true });
      if (text.includes('process up')) ready.resolve();
    }
  };
  const drained = Promise.all([read(proc.stdout), read(proc.stderr)]).then(() => ready.reject(new Error(`PgBouncer exited:\n${text}`)));
  const timer = setTimeout(() => ready.reject(new Error(`PgBouncer did not start within 10 s:\n${text}`)), 10_000);
  await ready.promise.finally(() => clearTimeout(timer));
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return {
    url: url.toString(),
    pid: proc.pid,
    log: () => text,
    stop: async () => {
      proc.kill('SIGTERM');
      await proc.exited;
      await drained.catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
