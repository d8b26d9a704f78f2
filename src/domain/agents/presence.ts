import type { PendingQuery, Row } from 'postgres';
import type { Queries, Sql } from '../../db/connect';
import type { Logger } from '../../log';

// Presence (docs/internals/decisions.md, "Presence"): whether an agent is online now, on any
// instance, and when it was last seen. Neither costs a request anything beyond a map update in
// memory: what the database learns is written by this process in batches, on a timer or when an
// agent's first held request opens here or its last one closes.
//
// Online: the agent holds a request open on some instance (an event stream, which `ams channel`
// and `ams listen` hold too, an MCP stream, an A2A stream, a bounded wait). Each instance keeps one
// row per agent holding something there (presence_connections) and beats every HEARTBEAT_MS; an
// instance that has not beaten for ONLINE_WITHIN_MS is dead, and its rows no longer count.
// Last seen: the end of its latest authenticated request, kept in memory and written at most once
// per LAST_SEEN_FLUSH_MS, so it is as old as that at most.

export const HEARTBEAT_MS = 10_000;
export const ONLINE_WITHIN_MS = 30_000;
export const LAST_SEEN_FLUSH_MS = 60_000;
// A wait answered and asked again at once (a client's wait loop) keeps its agent online without a
// write: the row goes only when nothing is held here for this long.
export const CLOSE_LINGER_MS = 3_000;
// Opens and closes in a burst are written together.
const SYNC_DELAY_MS = 50;
// How often closes older than the linger are looked for: an agent goes offline between
// CLOSE_LINGER_MS and that much later.
const SWEEP_MS = 1_000;
// An instance silent this long is removed with its rows; until then it only stops counting.
const FORGET_INSTANCE_AFTER = '1 hour';

export type PresenceRecord = { online: boolean; lastSeenAt: string | null };

export type Presence = {
  // An authenticated request of the agent ended: a map update, nothing more.
  seen(agentId: string): void;
  // The agent's first held request on this process opened, or its last one closed.
  opened(agentId: string): void;
  closed(agentId: string): void;
  start(): Promise<void>;
  stop(): Promise<void>;
  // Writes the last-seen times now, and what this instance holds (the timers' work, on demand).
  flush(): Promise<void>;
  sync(): Promise<void>;
};

export function trackPresence(sql: Sql, log: Logger, { flushMs = LAST_SEEN_FLUSH_MS, heartbeatMs = HEARTBEAT_MS, lingerMs = CLOSE_LINGER_MS } = {}): Presence {
  const instanceId = crypto.randomUUID();
  const lastSeen = new Map<string, number>();
  // Agents holding something here (or lately), and when the last request closed of those that
  // hold nothing now: swept once a second rather than a timer per close, since a wait loop closes
  // and opens thousands of times a second.
  const holding = new Set<string>();
  const closedAt = new Map<string, number>();
  // What the database holds of this instance's rows, as far as this process knows.
  const written = new Set<string>();
  let running = false;
  let timers: Timer[] = [];
  let pending: Timer | null = null;
  let syncing: Promise<void> = Promise.resolve();

  const writeConnections = async () => {
    const add = [...holding].filter((id) => !written.has(id));
    const remove = [...written].filter((id) => !holding.has(id));
    if (add.length === 0 && remove.length === 0) return;
    await sql`
      with removed as (delete from presence_connections where instance_id = ${instanceId} and agent_id = any(${remove}::uuid[]))
      insert into presence_connections (agent_id, instance_id)
      select a.id, ${instanceId} from agents a where a.id = any(${add}::uuid[])
      on conflict do nothing`;
    for (const id of add) written.add(id);
    for (const id of remove) written.delete(id);
  };
  // One write at a time, in order; a failed one is tried again at the next beat.
  const sync = () => {
    if (!running) return syncing;
    syncing = syncing.then(writeConnections).catch((error: Error) => log.warn('presence_write_failed', { error: error.message }));
    return syncing;
  };
  const soon = () => {
    if (pending || !running) return;
    pending = setTimeout(() => {
      pending = null;
      void sync();
    }, SYNC_DELAY_MS);
  };

  const beat = async () => {
    // A row that is gone (removed as dead after a long pause) takes this instance's rows with it:
    // they are written again.
    const [row] = await sql<{ inserted: boolean }[]>`
      insert into presence_instances (id) values (${instanceId})
      on conflict (id) do update set heartbeat_at = now()
      returning xmax = 0 as inserted`;
    if (row!.inserted) written.clear();
    await sql`delete from presence_instances where heartbeat_at < now() - ${FORGET_INSTANCE_AFTER}::interval`;
    await sync();
  };

  const flush = async () => {
    if (lastSeen.size === 0) return;
    const ids = [...lastSeen.keys()];
    const times = ids.map((id) => new Date(lastSeen.get(id)!).toISOString());
    lastSeen.clear();
    try {
      await sql`
        insert into agent_last_seen (agent_id, last_seen_at)
        select a.id, s.at from unnest(${ids}::uuid[], ${times}::timestamptz[]) s(id, at) join agents a on a.id = s.id
        on conflict (agent_id) do update set last_seen_at = greatest(agent_last_seen.last_seen_at, excluded.last_seen_at)`;
    } catch (error) {
      // Kept for the next flush, unless a newer time came meanwhile.
      ids.forEach((id, i) => lastSeen.has(id) || lastSeen.set(id, Date.parse(times[i]!)));
      log.warn('presence_write_failed', { error: (error as Error).message });
    }
  };

  const sweep = async () => {
    const before = performance.now() - lingerMs;
    let gone = false;
    for (const [agentId, at] of closedAt) {
      if (at > before) continue;
      closedAt.delete(agentId);
      holding.delete(agentId);
      gone = true;
    }
    if (gone) soon();
  };

  const every = (ms: number, work: () => Promise<void>) => {
    const timer = setInterval(() => void work().catch((error: Error) => log.warn('presence_write_failed', { error: error.message })), ms);
    timer.unref();
    return timer;
  };

  return {
    seen(agentId) {
      lastSeen.set(agentId, Date.now());
    },
    opened(agentId) {
      closedAt.delete(agentId);
      if (holding.has(agentId)) return;
      holding.add(agentId);
      soon();
    },
    closed(agentId) {
      closedAt.set(agentId, performance.now());
    },
    async start() {
      running = true;
      await beat();
      timers = [every(heartbeatMs, beat), every(flushMs, flush), every(SWEEP_MS, sweep)];
    },
    async stop() {
      if (!running) return;
      for (const timer of timers) clearInterval(timer);
      if (pending) clearTimeout(pending);
      running = false;
      await syncing;
      await flush();
      await sql`delete from presence_instances where id = ${instanceId}`.catch((error: Error) => log.warn('presence_write_failed', { error: error.message }));
    },
    flush,
    sync,
  };
}

// Whether the agent (`agentId`, a column) holds a request open on a live instance.
export const onlineNow = (sql: Queries, agentId: PendingQuery<Row[]>) => sql`exists (
  select 1 from presence_connections c join presence_instances i on i.id = c.instance_id
  where c.agent_id = ${agentId} and i.heartbeat_at > now() - ${`${ONLINE_WITHIN_MS} milliseconds`}::interval)`;

export const lastSeenAt = (sql: Queries, agentId: PendingQuery<Row[]>) => sql`(select s.last_seen_at from agent_last_seen s where s.agent_id = ${agentId})`;

// Agents online now, across instances (the metric and the Overview's count).
export async function agentsOnline(sql: Queries): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select count(distinct c.agent_id)::int as n
    from presence_connections c join presence_instances i on i.id = c.instance_id join agents a on a.id = c.agent_id
    where i.heartbeat_at > now() - ${`${ONLINE_WITHIN_MS} milliseconds`}::interval and a.archived_at is null`;
  return row!.n;
}

export const presenceRecord = (row: { online: boolean; lastSeenAt: Date | null }): PresenceRecord => ({
  online: row.online,
  lastSeenAt: row.lastSeenAt === null ? null : row.lastSeenAt.toISOString(),
});
