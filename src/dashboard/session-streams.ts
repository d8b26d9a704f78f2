import type { Sql } from '../db/connect';
import { endedSessions, type SessionEnd } from '../domain/people/people';
import type { Logger } from '../log';

type EndStream = (why: SessionEnd) => void;

// Every open event stream of this process, by the session it was opened with, so that none
// outlives its session: signing out through this process ends that session's streams at once,
// and one query every `checkMs` ends those whose session expired or was signed out through
// another instance. The timer runs only while a stream is open.
export function sessionStreams(sql: Sql, checkMs: number, log: Logger) {
  const open = new Map<string, Set<EndStream>>();
  let timer: ReturnType<typeof setInterval> | null = null;
  let checking = false;

  function forget(token: string, endStream: EndStream) {
    const ends = open.get(token);
    ends?.delete(endStream);
    if (ends?.size === 0) open.delete(token);
    if (open.size === 0 && timer) {
      clearInterval(timer);
      timer = null;
    }
  }

  function end(token: string, why: SessionEnd) {
    for (const endStream of [...(open.get(token) ?? [])]) {
      forget(token, endStream);
      endStream(why);
    }
  }

  async function check() {
    // A check slower than the interval is not stacked with another.
    if (checking) return;
    checking = true;
    try {
      for (const [token, why] of await endedSessions(sql, [...open.keys()])) end(token, why);
    } catch (error) {
      // The database is away: the feed is silent too, and the next check looks again.
      log.warn('session_check_failed', { error: (error as Error).message });
    } finally {
      checking = false;
    }
  }

  return {
    // Calls endStream once when the session ends; the returned function stops watching.
    watch(token: string, endStream: EndStream): () => void {
      let ends = open.get(token);
      if (!ends) open.set(token, (ends = new Set()));
      ends.add(endStream);
      timer ??= setInterval(check, checkMs);
      return () => forget(token, endStream);
    },
    end,
  };
}

export type SessionStreams = ReturnType<typeof sessionStreams>;
