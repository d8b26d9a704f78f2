import { afterAll, describe, expect, test } from 'bun:test';
import type { Subprocess } from 'bun';
import { INTERRUPTED } from '../src/domain/deliveries/delivery-steps';
import { createLogger } from '../src/log';
import { startWorker } from '../src/webhooks/worker';
import { publicFirst, refuseWakeUps } from './support/database';
import { useHarness } from './support/harness';
import { eventually, receiver } from './support/receiver';
import { attemptRows, FAST_WEBHOOKS, post, untilStep } from './support/webhooks';

// Real processes: the worker as `bun run worker` would start it, and the server with its inline worker.
const h = useHarness(FAST_WEBHOOKS);
const hook = receiver();
const running = new Set<Subprocess>();
afterAll(() => {
  for (const p of running) p.kill('SIGKILL');
});

async function spawnService(mode: 'worker' | 'serve', readyEvent: string, env: Record<string, string> = {}) {
  const proc = Bun.spawn(['bun', 'src/main.ts', mode], {
    env: { ...process.env, ...FAST_WEBHOOKS, DATABASE_URL: h.db.url, WEBHOOK_ALLOW_LOCAL: 'true', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    stdout: 'ignore',
    stderr: 'pipe',
  });
  running.add(proc);
  const lines: Record<string, unknown>[] = [];
  const ready = new Promise<Record<string, unknown>>((resolve, reject) => {
    void (async () => {
      let buffered = '';
      for await (const chunk of proc.stderr as ReadableStream<Uint8Array>) {
        buffered += new TextDecoder().decode(chunk);
        let nl: number;
        while ((nl = buffered.indexOf('\n')) >= 0) {
          const line = JSON.parse(buffered.slice(0, nl));
          buffered = buffered.slice(nl + 1);
          lines.push(line);
          if (line.event === readyEvent) resolve(line);
        }
      }
      reject(new Error(`${mode} exited before ${readyEvent}`));
    })();
  });
  return { proc, lines, ready: await ready };
}

describe('a worker killed mid-flight', () => {
  test('after kill -9 and a restart, the pending doorbell goes out within seconds', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    hook.reply(async (req) => {
      if (req.path === '/crash' && hook.received.filter((r) => r.path === '/crash').length === 1) await held;
      return new Response('ok');
    });
    const sender = await h.agent('crash-sender');
    const recipient = await h.agent('crash-recipient', { webhookUrl: hook.url('/crash') });

    const first = await spawnService('worker', 'worker_started');
    const { deliveryId } = await post(h, sender, recipient, { content: 'survive a crash' });
    await hook.waitFor(1);
    first.proc.kill('SIGKILL');
    await first.proc.exited;
    release();

    const restarted = performance.now();
    const second = await spawnService('worker', 'worker_started');
    await hook.waitFor(2, 8_000);
    await untilStep(h, deliveryId, 'notified');
    expect(performance.now() - restarted).toBeLessThan(8_000);
    expect(second.lines.some((l) => l.event === 'dead_workers_released')).toBe(true);
    // The killed worker never recorded its attempt: the worker that took the job over logs it as
    // cut off (the doorbell did reach the handler here), then its own attempt.
    expect(await attemptRows(h, deliveryId)).toMatchObject([
      { attempt: 1, status: null, interrupted: true, error: INTERRUPTED },
      { attempt: 2, status: 200, interrupted: false },
    ]);
    second.proc.kill('SIGTERM');
    expect(await second.proc.exited).toBe(0);
  }, 20_000);
});

describe('graceful shutdown', () => {
  test('SIGTERM stops taking requests, lets the doorbell in flight finish, and exits cleanly', async () => {
    hook.reply(async (req) => {
      if (req.path === '/graceful') await Bun.sleep(700);
      return new Response('ok');
    });
    const sender = await h.agent('graceful-sender');
    const recipient = await h.agent('graceful-recipient', { webhookUrl: hook.url('/graceful') });
    const server = await spawnService('serve', 'listening', { WEBHOOK_TIMEOUT_MS: '5000' });
    const base = (server.lines.find((l) => l.event === 'listening')!.url as string).replace('0.0.0.0', '127.0.0.1');
    const api = (path: string, body: unknown) =>
      fetch(base + path, {
        method: 'POST',
        headers: { authorization: `Bearer ${sender.key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }).then((r) => r.json() as Promise<{ data: { id: string } }>);
    const thread = await api('/api/threads', { title: 'Shutdown', participantUsernames: [recipient.username] });
    const message = await api(`/api/threads/${thread.data.id}/messages`, { content: 'finish me' });
    const before = hook.received.filter((r) => r.path === '/graceful').length;
    await eventually(async () => hook.received.filter((r) => r.path === '/graceful').length > before);

    server.proc.kill('SIGTERM');
    expect(await server.proc.exited).toBe(0);
    const [delivery] = await h.db.sql`select id, step from deliveries where message_id = ${message.data.id}`;
    expect(delivery!.step).toBe('notified');
    expect(await h.db.sql`select 1 from worker_heartbeats`).toHaveLength(0);
    expect(await fetch(base + '/health').then(() => 'answered', () => 'refused')).toBe('refused');
    expect(server.lines.map((l) => l.event)).toContain('stopped');
  }, 20_000);
});

// If graphile-worker's runner ever ends on its own, nothing in the process would ring a doorbell
// again; the worker reports it so that the process can stop and be restarted (src/main.ts).
describe('a runner that ends without being asked to', () => {
  const start = async () => {
    const failures: Error[] = [];
    const lines: Record<string, unknown>[] = [];
    const log = createLogger('info', (line) => lines.push(JSON.parse(line)));
    const worker = await startWorker({ sql: h.db.sql, databaseUrl: h.db.url, config: h.config, log, onFailed: (e) => failures.push(e) });
    return { worker, failures, lines };
  };

  test('is reported and logged, and stopping afterwards still closes everything', async () => {
    const { worker, failures, lines } = await start();
    await worker.runner.stop();
    await eventually(async () => failures.length === 1);
    expect(failures[0]!.message).toBe('graphile-worker stopped without being asked to.');
    expect(lines.filter((l) => l.event === 'worker_failed')).toMatchObject([
      { level: 'error', workerId: worker.workerId, error: 'graphile-worker stopped without being asked to.' },
    ]);
    await worker.stop();
    expect(lines.at(-1)).toMatchObject({ event: 'worker_stopped' });
    expect(failures).toHaveLength(1);
  });

  test('a stop that was asked for is not a failure', async () => {
    const { worker, failures, lines } = await start();
    await worker.stop();
    // The worker's own handlers of the runner's end were attached first, so they have run by now.
    await worker.runner.promise.catch(() => {});
    expect(failures).toEqual([]);
    expect(lines.some((l) => l.event === 'worker_failed')).toBe(false);
  });
});

// A wake-up follows the commit in a statement of its own (domain/deliveries/delivery-wake-ups.ts), so when it fails
// nobody is left to answer; the worker run on its own must still say so in its log.
describe('a wake-up the split worker could not send', () => {
  test('is logged as announce_failed by `ams worker`', async () => {
    await refuseWakeUps(h.db.sql);
    const sender = await h.agent('announce-sender');
    const recipient = await h.agent('announce-recipient', { webhookUrl: hook.url('/announce') });
    const { deliveryId } = await post(h, sender, recipient, { content: 'wake nobody' });
    // A run of its doorbell job was cut off before this worker started (a killed process): the
    // worker records that attempt first, and wakes its watchers after that statement commits (an
    // attempt the worker makes itself wakes them inside its record).
    await h.db.sql`update graphile_worker._private_jobs set attempts = 1 where key = ${`notify:${deliveryId}`}`;
    const worker = await spawnService('worker', 'worker_started', { DATABASE_URL: publicFirst(h.db.url) });
    await eventually(async () => (await attemptRows(h, deliveryId)).some((a) => a.interrupted));
    const failed = await eventually(async () => worker.lines.find((l) => l.event === 'announce_failed'));
    const { time: _, ...line } = failed;
    expect(line).toEqual({ level: 'warn', event: 'announce_failed', error: 'wake-ups refused' });
    worker.proc.kill('SIGTERM');
    expect(await worker.proc.exited).toBe(0);
  }, 20_000);
});
