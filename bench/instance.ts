import { join } from 'node:path';

const root = join(import.meta.dir, '..');

export type Instance = { base: string; pid: number; stop: () => Promise<void> };

// One instance of the service in its own process (bench/server.ts, with its inline worker), on a
// port of its own, for the benches that run several side by side; `env` names its database.
export async function startInstance(env: Record<string, string>, stderr: 'inherit' | 'ignore' = 'ignore'): Promise<Instance> {
  const proc = Bun.spawn(['bun', 'bench/server.ts'], {
    cwd: root,
    env: { ...process.env, ...env, HOST: '127.0.0.1', PORT: '0', WEBHOOK_ALLOW_LOCAL: 'true', LOG_LEVEL: 'warn' },
    stdout: 'pipe',
    stderr,
  });
  const { port } = await listeningPort(proc.stdout, 'the service ended before it listened');
  return {
    base: `http://127.0.0.1:${port}`,
    pid: proc.pid,
    stop: async () => {
      proc.kill('SIGTERM');
      await proc.exited;
    },
  };
}

// The port bench/server.ts prints as its first line once it listens; `ended` says what to look at
// when it ends before that.
export async function listeningPort(stream: ReadableStream<Uint8Array>, ended: string): Promise<{ port: number }> {
  const reader = stream.getReader();
  let text = '';
  while (!text.includes('\n')) {
    const { value, done } = await reader.read();
    if (done) throw new Error(ended);
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return JSON.parse(text.slice(0, text.indexOf('\n')));
}
