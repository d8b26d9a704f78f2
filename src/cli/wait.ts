import { invalid } from '../domain/shared/errors';
import { agentKeyFrom, baseUrlFrom, parseFlags } from './flags';
import { readStateFile, writeStateFile } from './state-file';
import type { InboxEntry } from '../domain/shared/schemas';

// `ams wait`: blocks until mail arrives for an agent, for agents that run as local programs and
// have no public URL for a webhook. It re-waits on the bounded-wait inbox until there is mail or
// the timeout passes; prints the new entries and exits 0, or prints nothing and exits 2.
export const WAIT_USAGE =
  'wait [--base-url <url>] [--timeout <seconds>] [--format json|text] [--since-file <path>]   (the key from AMS_AGENT_KEY)';

export const MAIL = 0;
export const TIMED_OUT = 2;

export type WaitOptions = {
  baseUrl: string;
  key: string;
  timeoutSeconds: number | null;
  format: 'json' | 'text';
  sinceFile: string | null;
};

export function parseWaitOptions(argv: string[], env: Record<string, string | undefined>, serviceUrl: string): WaitOptions {
  const { flags } = parseFlags(argv, { valued: ['--base-url', '--timeout', '--format', '--since-file'] }, WAIT_USAGE);
  const key = agentKeyFrom(env);
  const timeout = flags.timeout === undefined ? null : Number(flags.timeout);
  if (timeout !== null && !(timeout > 0)) throw invalid('--timeout must be a number of seconds above 0');
  const format = flags.format ?? 'json';
  if (format !== 'json' && format !== 'text') throw invalid('--format must be json or text');
  return {
    baseUrl: baseUrlFrom(flags['base-url'], env, serviceUrl),
    key,
    timeoutSeconds: timeout,
    format,
    sinceFile: flags['since-file'] ?? null,
  };
}

// The last delivery already printed, kept between runs so that a hook does not nag with the same
// mail: the next run waits for what came after it.
const readCursor = (path: string | null) => (path ? readStateFile(path) : Promise.resolve(undefined));

const asText = (entries: InboxEntry[]) =>
  entries.map((e) => `[${e.thread}] ${e.sender}: ${e.summary} (message ${e.messageId})`).join('\n');

// Ends as at the time-out (nothing printed, TIMED_OUT) when `signal` aborts: SIGINT or SIGTERM.
export async function waitForMail(options: WaitOptions, print: (text: string) => void, signal?: AbortSignal): Promise<number> {
  const deadline = options.timeoutSeconds === null ? Infinity : performance.now() + options.timeoutSeconds * 1000;
  const after = await readCursor(options.sinceFile);
  for (;;) {
    const remaining = (deadline - performance.now()) / 1000;
    if (remaining <= 0 || signal?.aborted) return TIMED_OUT;
    const query = new URLSearchParams({ wait: String(Math.min(60, Math.max(1, Math.floor(remaining)))) });
    if (after) query.set('after', after);
    const res = await fetch(`${options.baseUrl}/api/deliveries?${query}`, { headers: { authorization: `Bearer ${options.key}` }, signal }).catch((error: Error) => {
      if (signal?.aborted) return null;
      throw invalid(`Could not reach the service at ${options.baseUrl} (the address is --base-url, else AMS_URL, else PUBLIC_URL, else PORT on this machine): ${error.message}`);
    });
    if (res === null) return TIMED_OUT;
    const body = (await res.json().catch(() => null)) as { success?: boolean; data?: InboxEntry[]; error?: string } | null;
    if (!res.ok || !body?.success) throw invalid(body?.error ?? `The service answered HTTP ${res.status}.`);
    const entries = body.data!;
    if (entries.length === 0) continue;
    print(options.format === 'json' ? JSON.stringify(entries) : asText(entries));
    if (options.sinceFile) await writeStateFile(options.sinceFile, entries.at(-1)!.deliveryId);
    return MAIL;
  }
}
