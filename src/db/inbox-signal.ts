import type { Logger } from '../log';
import { AGENTS_CHANNEL } from './agent-cache';
import type { Sql } from './connect';

// Every new delivery is announced on this channel with its recipient's id (domain/deliveries/delivery-wake-ups.ts).
export const INBOX_CHANNEL = 'ams_inbox';
// Every change to a delivery (a step, an attempt) is announced here with the delivery's id.
export const DELIVERY_CHANNEL = 'ams_delivery';
// A receipt event for a sender's stream, with the sender's id (sql/019_agent_events.sql).
export const EVENTS_CHANNEL = 'ams_events';

// Wakes whoever waits on an agent's inbox. `subscribe` answers null once the process is
// shutting down, so that a waiting request answers at once instead of holding up the stop.
export type InboxSignal = {
  subscribe(agentId: string, wake: () => void): (() => void) | null;
  // Wakes when any of the deliveries changes (a sender waiting on its receipts).
  watchDeliveries(deliveryIds: string[], wake: () => void): (() => void) | null;
  // An agent's event stream: `wake` for a new event of the agent's (a delivery to it, and with
  // `receipts` a receipt of its message), `changed` when what its key answers for may have
  // changed (archived, a new key).
  subscribeEvents(agentId: string, wake: () => void, changed: () => void, options?: { receipts: boolean }): (() => void) | null;
  // `changed` alone, for a wait held open with the agent's key.
  watchAgent(agentId: string, changed: () => void): (() => void) | null;
  // True once the process is shutting down: a woken waiter answers with what it finds.
  stopped(): boolean;
};

export type InboxListener = InboxSignal & {
  start(): Promise<void>;
  stop(): Promise<void>;
  waiting(): number;
  // Deliveries being watched by waiting senders.
  watching(): number;
  // Streams open for agents: event streams, and MCP's GET streams.
  streaming(): number;
  // Times the LISTEN connection was established: above 1, it dropped and came back.
  connects(): number;
};

// Who waits on each key (an agent, a delivery). Most keys have one waiter: it is kept alone, not
// in a set of one, which at ten thousand agents each holding a stream saved 11 MB of sets.
type Registry = Map<string, (() => void) | Set<() => void>>;

const count = (held: (() => void) | Set<() => void>) => (typeof held === 'function' ? 1 : held.size);

function wake(held: (() => void) | Set<() => void> | undefined) {
  if (typeof held === 'function') held();
  else if (held) for (const fn of [...held]) fn();
}

function register(registry: Registry, key: string, fn: () => void) {
  const held = registry.get(key);
  if (held === undefined) registry.set(key, fn);
  else if (typeof held === 'function') registry.set(key, new Set([held, fn]));
  else held.add(fn);
  return () => {
    const now = registry.get(key);
    if (now === fn) registry.delete(key);
    else if (typeof now === 'object') {
      now.delete(fn);
      if (now.size === 0) registry.delete(key);
      else if (now.size === 1) registry.set(key, now.values().next().value!);
    }
  };
}

// One LISTEN connection per process, shared by every waiting request through a registry keyed by
// agent id: a waiter costs a closure, not a database connection. NOTIFY reaches the listener of
// every server instance on the database. postgres.js re-issues the LISTEN after the connection
// drops (a database restart, say); notifications sent while it was down are lost, so a reconnect
// wakes every waiter to look again.
export function listenForInbox(sql: Sql, log: Logger): InboxListener {
  const waiters: Registry = new Map();
  const watchers: Registry = new Map();
  const streams: Registry = new Map();
  const inboxStreams: Registry = new Map();
  const agentWatchers: Registry = new Map();
  let unlistenOthers: (() => Promise<void>)[] | null = null;
  let unlistenDeliveries: (() => Promise<void>) | null = null;
  let listens = 0;
  let stopped = false;
  let unlisten: (() => Promise<void>) | null = null;

  const wakeAll = () => {
    for (const registry of [waiters, watchers, streams, inboxStreams, agentWatchers]) for (const held of [...registry.values()]) wake(held);
  };

  return {
    subscribe(agentId, fn) {
      if (stopped) return null;
      return register(waiters, agentId, fn);
    },
    subscribeEvents(agentId, fn, changed, { receipts } = { receipts: true }) {
      if (stopped) return null;
      const undo = [register(receipts ? streams : inboxStreams, agentId, fn), register(agentWatchers, agentId, changed)];
      return () => undo.forEach((u) => u());
    },
    watchAgent(agentId, changed) {
      if (stopped) return null;
      return register(agentWatchers, agentId, changed);
    },
    watchDeliveries(deliveryIds, fn) {
      if (stopped) return null;
      const unwatch = deliveryIds.map((id) => register(watchers, id, fn));
      return () => unwatch.forEach((undo) => undo());
    },
    // Resumable: a start that failed part-way (PostgreSQL out of connections) is asked again.
    async start() {
      if (!unlisten) {
        const listening = await sql.listen(
          INBOX_CHANNEL,
          (agentId) => {
            wake(waiters.get(agentId));
            wake(streams.get(agentId));
            wake(inboxStreams.get(agentId));
          },
          () => {
            if (listens++ === 0) return;
            log.info('inbox_listener_reconnected', { waiting: waiters.size });
            wakeAll();
          },
        );
        unlisten = listening.unlisten;
      }
      // The same connection (postgres.js keeps one per pool for every channel), so one reconnect
      // above covers both.
      unlistenDeliveries ??= (await sql.listen(DELIVERY_CHANNEL, (deliveryId) => wake(watchers.get(deliveryId)))).unlisten;
      unlistenOthers ??= [
        (await sql.listen(EVENTS_CHANNEL, (agentId) => wake(streams.get(agentId)))).unlisten,
        (await sql.listen(AGENTS_CHANNEL, (agentId) => wake(agentWatchers.get(agentId)))).unlisten,
      ];
    },
    async stop() {
      stopped = true;
      wakeAll();
      await unlisten?.().catch(() => {});
      await unlistenDeliveries?.().catch(() => {});
      for (const undo of unlistenOthers ?? []) await undo().catch(() => {});
      unlisten = null;
      unlistenDeliveries = null;
      unlistenOthers = null;
    },
    stopped: () => stopped,
    waiting: () => [...waiters.values()].reduce((n, held) => n + count(held), 0),
    connects: () => listens,
    watching: () => watchers.size,
    streaming: () => [...streams.values(), ...inboxStreams.values()].reduce((n, held) => n + count(held), 0),
  };
}
