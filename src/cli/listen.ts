import { spawn } from 'node:child_process';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { agentKeyFrom, baseUrlFrom, parseFlags } from './flags';
import { readStateFile, writeStateFile } from './state-file';

// `ams listen`: holds the agent's event stream (GET /api/events) and hands on every event, in order:
// one JSON line per event on stdout, or one run of a command per event with the event on its stdin.
// It reconnects with backoff and resumes after the last event handed on; with --state-file that
// id survives a restart, so a listener started again misses nothing.
export const LISTEN_USAGE =
  'listen [--base-url <url>] [--exec <command>] [--state-file <path>]   (the key from AMS_AGENT_KEY)';

// How a listener ends: stopped by a signal; refused (a bad key or id: trying again cannot help);
// told that the events after its id are gone, so that its agent reads its inbox instead.
export const STOPPED = 0;
export const REFUSED = 1;
export const EVENTS_GONE = 3;

export type ListenOptions = StreamClient & { exec: string | null };

export function parseListenOptions(argv: string[], env: Record<string, string | undefined>, serviceUrl: string): ListenOptions {
  const { flags } = parseFlags(argv, { valued: ['--base-url', '--exec', '--state-file'] }, LISTEN_USAGE);
  return { baseUrl: baseUrlFrom(flags['base-url'], env, serviceUrl), key: agentKeyFrom(env), exec: flags.exec ?? null, stateFile: flags['state-file'] ?? null };
}

// What is handed on for each event: its id (to resume after), its type, and its data.
export type ListenedEvent = { id: string; event: string; data: unknown };

// Backoff between reconnections, reset by a stream that delivered something.
const FIRST_RETRY_MS = 500;
const MOST_RETRY_MS = 30_000;
// The service sends a heartbeat every 15 s by default: this long without a byte means the
// connection is dead even if no error says so.
const SILENCE_MS = 60_000;

type Io = { out: (line: string) => void; err: (line: string) => void; signal: AbortSignal };

export const listen = (options: ListenOptions, { out, err, signal }: Io) =>
  followEvents(options, { handOn: (event) => handOn(options, event, out, err), err, signal });

export type StreamClient = { baseUrl: string; key: string; stateFile: string | null };
export type Follower = { handOn: (event: ListenedEvent) => Promise<void> | void; err: (line: string) => void; signal: AbortSignal };

// Holds the agent's event stream until `signal` aborts, handing on each event in order and only
// then counting it as done (the state file moves past it). Every door of the CLI that listens
// (`ams listen`, `ams channel`) follows the stream through this.
export async function followEvents(options: StreamClient, { handOn, err, signal }: Follower): Promise<number> {
  let lastId = options.stateFile ? await readStateFile(options.stateFile) : undefined;
  let retryMs = FIRST_RETRY_MS;
  while (!signal.aborted) {
    const connection = new AbortController();
    const stop = () => connection.abort();
    signal.addEventListener('abort', stop);
    let silence: ReturnType<typeof setTimeout> | null = null;
    const heard = () => {
      if (silence) clearTimeout(silence);
      silence = setTimeout(() => connection.abort(), SILENCE_MS);
    };
    try {
      const headers: Record<string, string> = { authorization: `Bearer ${options.key}`, accept: 'text/event-stream' };
      if (lastId) headers['last-event-id'] = lastId;
      heard();
      const res = await fetch(`${options.baseUrl}/api/events`, { headers, signal: connection.signal });
      if (!res.ok || !res.body) {
        const body = (await res.json().catch(() => null)) as { error?: string } | null;
        const said = body?.error ?? `The service answered HTTP ${res.status}.`;
        // Anything else (the agent holding every stream it may, the database away) may pass: try again.
        if (res.status !== 401 && res.status !== 400 && res.status !== 410) throw new Error(said);
        err(said);
        if (res.status !== 410) return REFUSED;
        // The id kept is no use any more: the next start begins afresh instead of being refused again.
        if (options.stateFile) await writeStateFile(options.stateFile, '');
        return EVENTS_GONE;
      }
      const events = res.body
        .pipeThrough(new TextDecoderStream())
        .pipeThrough(new EventSourceParserStream({ onComment: heard }));
      for await (const message of events) {
        heard();
        if (!message.id || !message.event) continue;
        const event: ListenedEvent = { id: message.id, event: message.event, data: JSON.parse(message.data) };
        await handOn(event);
        lastId = event.id;
        if (options.stateFile) await writeStateFile(options.stateFile, lastId);
        retryMs = FIRST_RETRY_MS;
      }
    } catch (error) {
      if (signal.aborted) break;
      err(`The event stream at ${options.baseUrl} dropped (${(error as Error).message}); connecting again in ${retryMs} ms.`);
    } finally {
      if (silence) clearTimeout(silence);
      signal.removeEventListener('abort', stop);
    }
    if (signal.aborted) break;
    await sleep(retryMs, signal);
    retryMs = Math.min(retryMs * 2, MOST_RETRY_MS);
  }
  return STOPPED;
}

// An event handed on is done: its command has exited (a failure is reported, and the listener goes
// on, so that one bad event does not stop every later one).
async function handOn(options: ListenOptions, event: ListenedEvent, out: (line: string) => void, err: (line: string) => void) {
  const line = JSON.stringify(event);
  if (!options.exec) return out(line);
  const code = await new Promise<number>((resolve) => {
    const child = spawn('/bin/sh', ['-c', options.exec!], { stdio: ['pipe', 'inherit', 'inherit'] });
    child.on('error', () => resolve(127));
    child.on('exit', (status) => resolve(status ?? 1));
    child.stdin.on('error', () => {});
    child.stdin.end(`${line}\n`);
  });
  if (code !== 0) err(`The command exited with ${code} for event ${event.id} (${event.event}).`);
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done);
  });
