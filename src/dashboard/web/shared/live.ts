import { useEffect, useRef } from 'preact/hooks';
import {
  DASHBOARD_API,
  SESSION_ENDED,
  STREAM_PATH,
  STREAM_RETRY_MS,
  type SessionEndCode,
  type StreamEvent,
} from '../../../web/dashboard-protocol.ts';
import { api } from './api.ts';
import { onSessionEnd, sessionEnded, sessionIsOver, type SessionEnd } from './session.ts';
import type { Delivery } from './types.ts';

export type LiveEvent = { type: 'ready' } | { type: 'delivery'; delivery: Delivery } | { type: 'thread'; ids: string[] } | { type: 'agent' };
type Listener = (event: LiveEvent) => void;

function setLiveStatus(text: string, kind: 'on' | 'off') {
  const badge = document.querySelector('#live');
  if (!badge) return;
  badge.textContent = text;
  badge.className = `live ${kind}`;
}

const endedBy = (code: SessionEndCode): SessionEnd => ((Object.keys(SESSION_ENDED) as SessionEnd[]).find((end) => SESSION_ENDED[end].code === code) ?? 'expired');

// One event stream per page, whatever the page: delivery changes (with their fresh progress),
// thread and agent changes, and `ready` whenever the stream (re)opens, after which anything may
// have been missed. The server ends it with `session-ended` when the session ends.
export const live = (() => {
  const listeners = new Set<Listener>();
  let source: EventSource | null = null;
  let retry: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  const emit = (event: LiveEvent) => listeners.forEach((listener) => listener(event));
  function connect() {
    if (stopped) return;
    const stream = new EventSource(`${DASHBOARD_API}${STREAM_PATH}`);
    source = stream;
    const on = (name: StreamEvent, handle: (event: MessageEvent<string>) => void) => stream.addEventListener(name, handle);
    on('ready', () => {
      setLiveStatus('Live', 'on');
      emit({ type: 'ready' });
    });
    on('delivery', (event) => emit({ type: 'delivery', delivery: JSON.parse(event.data) }));
    on('thread', (event) => emit({ type: 'thread', ids: JSON.parse(event.data).ids }));
    on('agent', () => emit({ type: 'agent' }));
    on('session-ended', (event) => {
      const { error, code } = JSON.parse(event.data) as { error: string; code: SessionEndCode };
      sessionEnded(error, endedBy(code));
    });
    stream.addEventListener('error', async () => {
      if (stopped) return;
      setLiveStatus('Reconnecting…', 'off');
      // The browser retries a dropped connection by itself, but gives up on a refused one: then the
      // session may have ended while the stream was down (api() says so); anything else is tried again.
      if (stream.readyState !== EventSource.CLOSED) return;
      await api('GET', '/me').catch(() => null);
      if (!sessionIsOver()) retry = setTimeout(connect, STREAM_RETRY_MS);
    });
  }
  return {
    start: () => source || connect(),
    stop() {
      stopped = true;
      clearTimeout(retry);
      source?.close();
    },
    subscribe(listener: Listener) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
  };
})();

onSessionEnd(() => {
  live.stop();
  setLiveStatus('Signed out', 'off');
});

export function useLive(handler: Listener) {
  const latest = useRef(handler);
  latest.current = handler;
  useEffect(() => live.subscribe((event) => latest.current(event)), []);
}
