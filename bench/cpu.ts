import { readdirSync, readFileSync } from 'node:fs';

// CPU time used so far, in milliseconds, by the service process, by every PostgreSQL process on
// the machine and by this load process: read before and after a run, it tells where a request's
// time went on a machine whose cores all three share.
const TICK_MS = 10; // Linux's USER_HZ is 100 on every architecture it reports to user space.

function processCpuMs(pid: number | string): { comm: string; ms: number } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = stat.lastIndexOf(')');
    const comm = stat.slice(stat.indexOf('(') + 1, close);
    const fields = stat.slice(close + 2).split(' ');
    // After the command: state is field 3, utime and stime are fields 14 and 15 (1-based, man 5 proc).
    return { comm, ms: (Number(fields[11]) + Number(fields[12])) * TICK_MS };
  } catch {
    return null; // gone meanwhile
  }
}

// PostgreSQL's figure is per process: one that exits during a run (a backend, autovacuum) takes
// its time with it, so only processes seen at the end are counted (a slight undercount, never a
// negative figure), those started meanwhile in full.
export type CpuSnapshot = { server: number; database: Map<string, number>; load: number };

export function cpuSnapshot(serverPid: number): CpuSnapshot {
  const database = new Map<string, number>();
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const p = processCpuMs(pid);
    if (p?.comm === 'postgres') database.set(pid, p.ms);
  }
  const usage = process.cpuUsage();
  return { server: processCpuMs(serverPid)?.ms ?? NaN, database, load: (usage.user + usage.system) / 1000 };
}

// Microseconds of CPU per request between two snapshots.
export function cpuPerRequest(before: CpuSnapshot, after: CpuSnapshot, requests: number) {
  let databaseMs = 0;
  for (const [pid, ms] of after.database) databaseMs += ms - (before.database.get(pid) ?? 0);
  const us = (ms: number) => Math.round((ms * 1000) / requests);
  return { server: us(after.server - before.server), database: us(databaseMs), load: us(after.load - before.load) };
}
