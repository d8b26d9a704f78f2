import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { freePort } from './ports';

// A private cluster of the PostgreSQL major version the distribution ships (Debian's binaries under
// /usr/lib/postgresql), for behaviour that differs by version: the embedded server the other tests
// use is 18, and the README supports 15 and newer. Its server process and every backend run under
// an address-space cap, so that a statement that would take the machine's memory fails instead.
export type PrivateCluster = {
  url: string;
  // The largest resident size, in kB, that any backend has reached so far (VmHWM).
  peakBackendKb: () => number;
  stop: () => Promise<void>;
};

export async function privateCluster(major: number, { addressSpaceBytes }: { addressSpaceBytes: number }): Promise<PrivateCluster> {
  const bin = `/usr/lib/postgresql/${major}/bin`;
  if (!existsSync(`${bin}/postgres`)) {
    throw new Error(`PostgreSQL ${major}'s server is not installed at ${bin}: apt-get install -y postgresql-${major} (Debian ships it there).`);
  }
  const dir = mkdtempSync(join(tmpdir(), `ams-pg${major}-`));
  // PostgreSQL refuses to run as root: as root, the cluster is the postgres user's.
  const asPostgres = process.getuid?.() === 0 ? ['setpriv', '--reuid=postgres', '--regid=postgres', '--init-groups', '--'] : [];
  if (asPostgres.length > 0) {
    chmodSync(dir, 0o700);
    const { uid, gid } = postgresUser();
    chownSync(dir, uid, gid);
  }
  const data = join(dir, 'data');
  const init = Bun.spawnSync([...asPostgres, `${bin}/initdb`, '-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8'], {
    stdout: 'pipe',
    stderr: 'pipe',
  });
  if (init.exitCode !== 0) throw new Error(`initdb failed: ${init.stderr.toString()}`);
  const port = await freePort();
  const server = Bun.spawn(
    [
      'prlimit',
      `--as=${addressSpaceBytes}`,
      '--',
      ...asPostgres,
      `${bin}/postgres`,
      '-D',
      data,
      '-p',
      String(port),
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      `unix_socket_directories=${dir}`,
      '-c',
      'shared_buffers=16MB',
      '-c',
      'fsync=off',
    ],
    { stdout: 'ignore', stderr: 'pipe' },
  );
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const deadline = performance.now() + 30_000;
  for (;;) {
    const probe = postgres(url, { max: 1, connect_timeout: 1, onnotice: () => {} });
    try {
      await probe`select 1`;
      await probe`create database ams`;
      break;
    } catch (error) {
      if (server.exitCode !== null || performance.now() > deadline) {
        server.kill();
        throw new Error(`PostgreSQL ${major} did not start: ${(error as Error).message}`);
      }
      await Bun.sleep(100);
    } finally {
      await probe.end({ timeout: 1 });
    }
  }
  return {
    url: url.replace(/\/postgres$/, '/ams'),
    peakBackendKb: () => Math.max(0, ...childrenOf(server.pid).map(peakResidentKb)),
    stop: async () => {
      server.kill('SIGINT');
      await server.exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function postgresUser(): { uid: number; gid: number } {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  if (!line) throw new Error('There is no postgres user to run PostgreSQL as (running as root).');
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

// The server's processes: prlimit and setpriv replace themselves, so the spawned pid is the server's.
export function childrenOf(parent: number): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => {
      try {
        // The parent pid is the fourth field, after the command name in parentheses.
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === parent;
      } catch {
        return false;
      }
    });
}

function peakResidentKb(pid: number): number {
  try {
    const match = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) : 0;
  } catch {
    return 0;
  }
}
