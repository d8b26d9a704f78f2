import { median, round } from './stats';

type Latency = { p50: number; p99: number; perSecond?: number };

// Every figure is the median over the runs of that figure.
const med = (runs: Latency[] | undefined, key: keyof Latency) => (runs ? round(median(runs.map((r) => r[key]!)), key === 'perSecond' ? 0 : 2) : NaN);
const ms = (n: number) => `${n.toFixed(n < 10 ? 2 : 1)} ms`;
const latency = (runs: Latency[] | undefined) => `p50 ${ms(med(runs, 'p50'))} · p99 ${ms(med(runs, 'p99'))}`;
const ratio = (a: number, b: number) => `${(a / b).toFixed(2)} ×`;
const met = (ok: boolean) => (ok ? 'met' : '**missed**');

export type Row = { scenario: string; figure: string; measured: string; baseline: string; ratio: string; target: string; met: string };

export function rows(r: any): Row[] {
  const out: Row[] = [];
  if (r.post) {
    const bare = med(r.post.bareInsert, 'perSecond');
    for (const [key, label] of [['fanOut1', 'fan-out 1'], ['fanOut10', 'fan-out 10']] as const) {
      const rate = med(r.post[key], 'perSecond');
      out.push({
        scenario: `Post message, ${label}, ${r.post.connections} connections`,
        figure: 'messages/s; latency',
        measured: `${rate}/s; ${latency(r.post[key])}`,
        baseline: `bare INSERT route ${bare}/s; ${latency(r.post.bareInsert)}`,
        ratio: ratio(rate, bare),
        target: key === 'fanOut1' ? '≥ 1.0 ×' : '≥ 0.6 ×',
        met: met(rate / bare >= (key === 'fanOut1' ? 1 : 0.6)),
      });
    }
  }
  if (r.doorbellLatency) {
    const d = r.doorbellLatency;
    const p50 = med(d.doorbell, 'p50');
    const p99 = med(d.doorbell, 'p99');
    out.push({
      scenario: `Doorbell latency at a steady ${d.rate} msg/s`,
      figure: 'commit → local receiver',
      measured: latency(d.doorbell),
      baseline: `graphile-worker add_job → no-op task ${latency(d.rawJob)}`,
      ratio: `p50 ${ratio(p50, med(d.rawJob, 'p50'))}`,
      target: 'p50 ≤ 1.5 ×, p99 ≤ 20 ms',
      met: met(p50 <= 1.5 * med(d.rawJob, 'p50') && p99 <= 20),
    });
  }
  if (r.headOfLine) {
    const d = r.headOfLine;
    const beside = med(d.beside, 'p50');
    const alone = med(d.alone, 'p50');
    out.push({
      scenario: `Healthy doorbell beside ${d.hanging} hanging deliveries, ${d.rate} msg/s`,
      figure: 'commit → local receiver',
      measured: latency(d.beside),
      baseline: `the same agent alone ${latency(d.alone)}`,
      ratio: `p50 ${ratio(beside, alone)}`,
      target: 'p50 ≤ 2 ×',
      met: met(beside <= 2 * alone),
    });
  }
  if (r.doorbellThroughput) {
    const d = r.doorbellThroughput;
    const rate = med(d.doorbell, 'perSecond');
    const raw = med(d.rawJob, 'perSecond');
    out.push({
      scenario: `Doorbell throughput, backlog of ${d.doorbell[0].count} drained`,
      figure: 'notifications/s to a local receiver',
      measured: `${rate}/s`,
      baseline: `graphile-worker no-op jobs ${raw}/s`,
      ratio: ratio(rate, raw),
      target: '≥ 1.0 ×',
      met: met(rate / raw >= 1),
    });
  }
  if (r.inbox) {
    const big = med(r.inbox.backlog1M, 'p99');
    const small = med(r.inbox.backlog1k, 'p99');
    out.push({
      scenario: `Inbox read, backlog 1 M vs 1 k, ${r.inbox.connections} connections`,
      figure: 'latency (50 entries)',
      measured: `1 M: ${latency(r.inbox.backlog1M)}`,
      baseline: `1 k: ${latency(r.inbox.backlog1k)}`,
      ratio: `p99 ${ratio(big, small)}`,
      target: 'p99 ≤ 1.5 ×',
      met: met(big <= 1.5 * small),
    });
  }
  const inboxCpu = cpuTotal(r.inbox?.backlog1k);
  const bareCpu = cpuTotal(r.post?.bareInsert);
  if (inboxCpu && bareCpu) {
    out.push({
      scenario: 'Inbox read, 50 entries, CPU per call',
      figure: 'µs of CPU, service + PostgreSQL + load',
      measured: `${inboxCpu} µs`,
      baseline: `bare INSERT route ${bareCpu} µs`,
      ratio: ratio(inboxCpu, bareCpu),
      target: '≤ 1.5 ×',
      met: met(inboxCpu <= 1.5 * bareCpu),
    });
  }
  if (r.waitersOneAgent) {
    const runs = r.waitersOneAgent.service;
    const bare = r.waitersOneAgent.bareBun;
    out.push({
      scenario: `${runs[0].waits} held waits of one agent, one post`,
      figure: 'post sent → each wait answered; server RSS held',
      measured: `${latency(runs)}; ${med(runs.map((x: any) => ({ p50: x.rssHeldMb })), 'p50')} MB`,
      baseline: `bare Bun.serve answering as many held requests at once ${latency(bare)}`,
      ratio: `p99 ${ratio(med(runs, 'p99'), med(bare, 'p99'))}`,
      target: 'p99 ≤ 100 ms',
      met: met(med(runs, 'p99') <= 100),
    });
  }
  if (r.waitersManyAgents) {
    const runs = r.waitersManyAgents;
    const peak = r.serverRssPeakMb?.waitersManyAgents ?? NaN;
    out.push({
      scenario: `${runs[0].waits} waiting agents, ${runs[0].woken} woken at ${runs[0].rate}/s`,
      figure: 'post sent → that agent’s wait answered; server RSS peak',
      measured: `${latency(runs)}; ${peak} MB`,
      baseline: `RSS before opening ${med(runs.map((x: any) => ({ p50: x.rssBeforeMb })), 'p50')} MB`,
      ratio: '—',
      target: 'p99 ≤ 50 ms, RSS ≤ 300 MB',
      met: met(med(runs, 'p99') <= 50 && peak <= 300),
    });
  }
  if (r.boundedWait) {
    const runs = r.boundedWait.runs;
    const wake = runs.map((x: any) => x.wake);
    const bell = runs.map((x: any) => x.doorbell);
    out.push({
      scenario: 'Bounded-wait wake-up',
      figure: 'post sent → waiting request answered',
      measured: latency(wake),
      baseline: `doorbell of the same posts ${latency(bell)}`,
      ratio: `p50 ${ratio(med(wake, 'p50'), med(bell, 'p50'))}`,
      target: 'p50 ≤ 10 ms',
      met: met(med(wake, 'p50') <= 10),
    });
  }
  if (r.serverRssPeakMb) {
    const peaks = r.serverRssPeakMb as Record<string, number>;
    // The waiters scenarios hold 10 000 connections on purpose and have their own bound above.
    const loaded = Object.entries(peaks).filter(([k]) => k !== 'idle' && !k.startsWith('waiters'));
    const peak = Math.max(...loaded.map(([, v]) => v));
    out.push({
      scenario: 'Memory',
      figure: 'server RSS, peak under load',
      measured: `${peak} MB`,
      baseline: loaded.map(([k, v]) => `${k} ${v}`).join(', '),
      ratio: '—',
      target: '≤ 200 MB',
      met: met(peak <= 200),
    });
  }
  if (r.start) {
    out.push({
      scenario: 'Start',
      figure: 'compiled binary: spawn → /health 200',
      measured: ms(r.start.medianReadyMs),
      baseline: `idle RSS ${r.start.idleRssMb} MB`,
      ratio: '—',
      target: '—',
      met: '—',
    });
  }
  return out;
}

export function report(r: any): string {
  const m = r.machine;
  const head = `${m.cpus} × ${m.cpuModel}, ${m.memoryGb} GB, PostgreSQL ${m.postgres} (${m.postgresWhere}), Bun ${m.bun}; median of ${r.runs} runs per figure`;
  const cols: (keyof Row)[] = ['scenario', 'figure', 'measured', 'baseline', 'ratio', 'target', 'met'];
  const lines = [
    `| Scenario | Figure | Measured | Baseline (same run) | Ratio | Target | |`,
    `|---|---|---|---|---|---|---|`,
    ...rows(r).map((row) => `| ${cols.map((c) => row[c]).join(' | ')} |`),
  ];
  return `${head}\n\n${lines.join('\n')}\n${cpuTable(r)}`;
}

type CpuRun = { cpuUs?: { server: number; database: number; load: number } };

// Median CPU per call over the runs, all three processes together.
function cpuTotal(list: CpuRun[] | undefined): number | null {
  if (!list?.every((run) => run.cpuUs)) return null;
  return median(list.map((run) => run.cpuUs!.server + run.cpuUs!.database + run.cpuUs!.load));
}

// CPU microseconds per request, median over the runs, for every scenario: where the time of a
// ratio went, on cores that the service, PostgreSQL and the load share. The waiters' own process
// is not in "Load".
function cpuTable(r: any): string {
  const runs: [string, CpuRun[] | undefined][] = [
    ['Bare INSERT route (per request)', r.post?.bareInsert],
    ['Post message, fan-out 1 (per post)', r.post?.fanOut1],
    ['Post message, fan-out 10 (per post)', r.post?.fanOut10],
    ['Doorbell at 200/s (per post and its doorbell)', r.doorbellLatency?.doorbell],
    ['graphile-worker add_job at 200/s (per job)', r.doorbellLatency?.rawJob],
    ['Healthy doorbell beside hanging ones (per post)', r.headOfLine?.beside],
    ['Doorbell backlog drained (per doorbell)', r.doorbellThroughput?.doorbell],
    ['graphile-worker no-op backlog drained (per job)', r.doorbellThroughput?.rawJob],
    ['Inbox read, 1 k backlog (per read)', r.inbox?.backlog1k],
    ['Inbox read, 1 M backlog (per read)', r.inbox?.backlog1M],
    ['10 000 waits of one agent (per answer)', r.waitersOneAgent?.service],
    ['10 000 waiting agents (per post and its wake-up)', r.waitersManyAgents],
  ];
  const measured = runs.filter(([, list]) => list?.every((run) => run.cpuUs));
  if (measured.length === 0) return '';
  const us = (list: CpuRun[], key: 'server' | 'database' | 'load') => median(list.map((run) => run.cpuUs![key]));
  const lines = measured.map(([name, list]) => {
    const [server, database, load] = [us(list!, 'server'), us(list!, 'database'), us(list!, 'load')];
    return `| ${name} | ${server} | ${database} | ${load} | ${server + database + load} |`;
  });
  return [
    '',
    'CPU per request (µs, median of the runs):',
    '',
    '| Scenario | Service | PostgreSQL | Load | Total |',
    '|---|---|---|---|---|',
    ...lines,
    '',
  ].join('\n');
}
