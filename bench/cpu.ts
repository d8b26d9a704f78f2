import { readdirSync, readFileSync } from 'node:fs';
import postgres from 'postgres';

// CPU time used so far, in milliseconds, by the service process, by the bench's own PostgreSQL
// (its postmaster and every process under it, never another server on the machine) and by this
// load process: read before and after a run, it tells where a request's time went on a machine
// whose cores all three share.
const TICK_MS = 10; // Linux's USER_HZ is 100 on every architecture it reports to user space.

// `ms` is the process's own time; `reaped`, that of its children that have exited and been waited
// for (cutime and cstime), which is where a backend's time goes when it ends.
type ProcessStat = { comm: string; ppid: number; ms: number; reaped: number };

function processStat(pid: number | string): ProcessStat | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = stat.lastIndexOf(')');
    const comm = stat.slice(stat.indexOf('(') + 1, close);
    const fields = stat.slice(close + 2).split(' ');
    // After the command: state is field 3, ppid 4, utime and stime 14 and 15, cutime and cstime 16
    // and 17 (1-based, man 5 proc).
    const ticks = (i: number) => Number(fields[i]) * TICK_MS;
    return { comm, ppid: Number(fields[1]), ms: ticks(11) + ticks(12), reaped: ticks(13) + ticks(14) };
  } catch {
    return null; // gone meanwhile
  }
}

export const processCpuMs = (pid: number) => processStat(pid)?.ms ?? NaN;

// The postmaster of the server behind `url`: the parent of the backend serving this connection.
// Null when that server is not a process on this machine (another host, a container's pid
// namespace): its CPU is then not counted rather than counted wrongly.
export async function postmasterPid(url: string): Promise<number | null> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql<{ pid: number }[]>`select pg_backend_pid() as pid`;
    const backend = processStat(row!.pid);
    const postmaster = backend && processStat(backend.ppid);
    return backend?.comm === 'postgres' && postmaster?.comm === 'postgres' ? backend.ppid : null;
  } finally {
    await sql.end();
  }
}

// A process and all its descendants, from the kernel's children list of each of their threads.
function processTree(root: number): number[] {
  const tree = [root];
  for (let i = 0; i < tree.length; i++) {
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${tree[i]}/task`);
    } catch {
      continue;
    }
    for (const task of tasks) {
      try {
        const children = readFileSync(`/proc/${tree[i]}/task/${task}/children`, 'utf8').trim();
        if (children) tree.push(...children.split(' ').map(Number));
      } catch {}
    }
  }
  return tree;
}

// CPU used so far by a postmaster and everything under it: each process's own time and that of
// its children that have exited. A backend or autovacuum worker that ends between two readings
// moves its whole time into its parent's reaped figure, so the difference of two readings counts
// every process exactly once, those that came and went included.
export function databaseCpuMs(postmaster: number): number {
  let ms = 0;
  for (const pid of processTree(postmaster)) {
    const p = processStat(pid);
    if (p) ms += p.ms + p.reaped;
  }
  return ms;
}

export type CpuSnapshot = { server: number; database: number | null; load: number };

export function cpuSnapshot(serverPid: number, databasePid: number | null): CpuSnapshot {
  const usage = process.cpuUsage();
  return {
    server: processCpuMs(serverPid),
    database: databasePid === null ? null : databaseCpuMs(databasePid),
    load: (usage.user + usage.system) / 1000,
  };
}

// Microseconds of CPU per request between two snapshots; database is null when it was not counted.
export function cpuPerRequest(before: CpuSnapshot, after: CpuSnapshot, requests: number) {
  const us = (ms: number) => Math.round((ms * 1000) / requests);
  const database = before.database !== null && after.database !== null ? us(after.database - before.database) : null;
  return { server: us(after.server - before.server), database, load: us(after.load - before.load) };
}
