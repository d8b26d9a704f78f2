import type { Logger } from '../log';
import { byteQueuing, queuedBytes } from '../web/event-stream';

type Relay = { log: Logger; backlogBytes: number; closed: () => boolean; close: () => void };

// An SDK's stream of inbox updates, relayed bounded (below) while `watchWith` watches the inbox for
// it. Everything is let go once, however the stream ends (the client gone, its backlog past the
// bound, the watch ended): the watch, the SDK's reader and the SDK's server (`shutDown`).
export function relayWatched(
  request: Request,
  response: Response & { body: ReadableStream<Uint8Array> },
  { log, backlogBytes }: { log: Logger; backlogBytes: number },
  shutDown: () => void,
  watchWith: (close: () => void) => (() => void) | null,
): Response {
  const reader = response.body.getReader();
  let closed = false;
  let unwatch: (() => void) | null = null;
  const close = () => {
    if (closed) return;
    closed = true;
    unwatch?.();
    void reader.cancel().catch(() => {});
    shutDown();
  };
  unwatch = watchWith(close);
  request.signal.addEventListener('abort', close, { once: true });
  if (!unwatch || request.signal.aborted) close();
  else if (closed) unwatch();
  return relayBounded(response, reader, { log, backlogBytes, closed: () => closed, close });
}

// A stream an SDK writes (resource updates, keep-alives), passed on to the client: the GET stream
// of 2025-11-25 and the subscriptions/listen stream of 2026-07-28. A comment at once, so that the
// answer's head goes out before the first update (a streamed body's head waits for its first
// bytes). Then what the SDK writes is taken as it comes and queued here, where its size is known:
// the SDK's own queue takes whatever it is given, and a client that stopped reading would have
// every later update held for it. `close` is called once the stream is over, however it ends.
export function relayBounded(response: Response, reader: { read(): Promise<{ done: boolean; value?: Uint8Array }> }, { log, backlogBytes, closed, close }: Relay): Response {
  const body = new ReadableStream<Uint8Array>(
    {
      start(controller) {
        controller.enqueue(new TextEncoder().encode(': open\n\n'));
        void (async () => {
          try {
            for (;;) {
              const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true as const }));
              if (done || closed()) break;
              const queued = queuedBytes(controller);
              // Errored, or taken down by the server under this loop: nobody to send to.
              if (queued === null) break;
              if (queued > backlogBytes) {
                log.warn('mcp_stream_dropped', { reason: 'the client stopped reading', backlogBytes });
                break;
              }
              controller.enqueue(value);
            }
          } catch {
            // The body was torn down between the read and the enqueue: this stream only is over.
          } finally {
            close();
            try {
              controller.close();
            } catch {}
          }
        })();
      },
      cancel: close,
    },
    byteQueuing(),
  );
  return new Response(body, { status: response.status, headers: response.headers });
}
