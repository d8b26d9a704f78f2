import type { Subprocess } from 'bun';
import { track } from '../../test/support/children';
import { freePort } from '../../test/support/ports';

// The service as it runs in production: `bun src/main.ts serve` in its own process, so that it can
// be killed without warning. Every line it logs is kept, parsed, and also as raw text (the secrets
// test searches the raw text).
export type Service = {
  proc: Subprocess<'ignore', 'ignore', 'pipe'>;
  base: string;
  port: number;
  lines: Record<string, unknown>[];
  raw: () => string;
  kill9: () => Promise<void>;
  stop: () => Promise<number>;
};

export const FAST = {
  WEBHOOK_RETRY_DELAYS_MS: '100,200,300',
  WEBHOOK_TIMEOUT_MS: '2000',
  WORKER_HEARTBEAT_MS: '200',
  WORKER_STALE_MS: '1000',
};

// Starts the server (or, with `command: 'worker'`, the webhook worker alone) and waits until it
// logs `listening` (`worker_started`), or with `until`, the first line that matches it.
export async function startService(
  env: Record<string, string>,
  {
    port,
    command = 'serve',
    until = (line) => line.event === (command === 'serve' ? 'listening' : 'worker_started'),
  }: { port?: number; command?: 'serve' | 'worker'; until?: (line: Record<string, unknown>) => boolean } = {},
): Promise<Service> {
  const listenPort = port ?? (await freePort());
  const proc = Bun.spawn(['bun', 'src/main.ts', command], {
    env: {
      ...process.env,
      ...FAST,
      WEBHOOK_ALLOW_LOCAL: 'true',
      HOST: '127.0.0.1',
      PORT: String(listenPort),
      LOG_LEVEL: 'info',
      ...env,
    },
    stdin: 'ignore',
    stdout: 'ignore',
    stderr: 'pipe',
  });
  track(proc);
  const lines: Record<string, unknown>[] = [];
  let text = '';
  const ready = Promise.withResolvers<void>();
  const drained = (async () => {
    let buffered = '';
    const decoder = new TextDecoder();
    for await (const chunk of proc.stderr) {
      const piece = decoder.decode(chunk, { stream: true });
      text += piece;
      buffered += piece;
      let nl: number;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        try {
          const parsed = JSON.parse(line);
          lines.push(parsed);
          if (until(parsed)) ready.resolve();
        } catch {
          lines.push({ event: 'unparsed', line });
        }
      }
    }
    ready.reject(new Error(`the server exited before it was ready:\n${text}`));
  })();
  const timer = setTimeout(() => ready.reject(new Error(`the server was not ready within 30 s:\n${text}`)), 30_000);
  await ready.promise.finally(() => clearTimeout(timer));
  return {
    proc,
    base: `http://127.0.0.1:${listenPort}`,
    port: listenPort,
    lines,
    raw: () => text,
    kill9: async () => {
      proc.kill('SIGKILL');
      await proc.exited;
      await drained;
    },
    stop: async () => {
      proc.kill('SIGTERM');
      const code = await proc.exited;
      await drained;
      return code;
    },
  };
}

export type Answer = { status: number; body: any; ms: number };

// One JSON request; a refused or dropped connection is an answer too (status 0).
export async function call(
  base: string,
  method: string,
  path: string,
  opts: { key?: string; body?: unknown; headers?: Record<string, string>; timeoutMs?: number } = {},
): Promise<Answer> {
  const started = performance.now();
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  try {
    const res = await fetch(base + path, {
      method,
      headers,
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      signal: AbortSignal.timeout(opts.timeoutMs ?? 15_000),
    });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {}
    return { status: res.status, body, ms: performance.now() - started };
  } catch (error) {
    return { status: 0, body: String(error), ms: performance.now() - started };
  }
}
