import type { Socket } from 'bun';

type Link = { upstream: Socket<unknown> | null; pending: Uint8Array[]; refused: boolean; toClient: Uint8Array[]; toUpstream: Uint8Array[] };

// Bun's sockets write what the kernel takes at once and answer how much that was; the rest is the
// writer's to keep and send on `drain`. Without this, a burst (a pool reconnecting) loses bytes
// mid-stream and a connection hangs.
function send(socket: Socket<unknown>, queue: Uint8Array[], chunk: Uint8Array) {
  if (queue.length === 0) {
    const written = socket.write(chunk);
    if (written < 0 || written === chunk.length) return;
    chunk = chunk.subarray(written);
  }
  queue.push(new Uint8Array(chunk));
}
function flush(socket: Socket<unknown>, queue: Uint8Array[]) {
  while (queue.length > 0) {
    const chunk = queue[0]!;
    const written = socket.write(chunk);
    if (written < 0) return void (queue.length = 0);
    if (written < chunk.length) return void (queue[0] = chunk.subarray(written));
    queue.shift();
  }
}

// A TCP gate in front of a real PostgreSQL. While `full`, each new connection gets the error
// PostgreSQL itself sends when every slot is taken (FATAL 53300 "sorry, too many clients already")
// and is closed; otherwise bytes pass both ways untouched. Connections already open stay open.
// `admit(n)` lets the next n connections through and then fills up again, so that a test can run
// out of connections at a chosen step of a start. `point` moves it to another server.
export function pgGate(target: { host: string; port: number }) {
  const state = { full: true, admitting: 0, target };
  const clients = new Set<Socket<Link>>();
  const server = Bun.listen<Link>({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      async open(client) {
        clients.add(client);
        const admitted = state.admitting > 0;
        if (admitted && --state.admitting === 0) state.full = true;
        const link: Link = (client.data = { upstream: null, pending: [], refused: state.full && !admitted, toClient: [], toUpstream: [] });
        if (link.refused) return;
        try {
          link.upstream = await Bun.connect({
            hostname: state.target.host,
            port: state.target.port,
            socket: {
              data: (_, chunk) => send(client, link.toClient, chunk),
              drain: (upstream) => flush(upstream, link.toUpstream),
              close: () => void client.end(),
              error: () => void client.end(),
            },
          });
        } catch {
          // Nothing listens where the gate points (a primary that died): the client's connection
          // ends as a refused one would.
          return void client.end();
        }
        for (const chunk of link.pending) send(link.upstream, link.toUpstream, chunk);
      },
      drain(client) {
        flush(client, client.data.toClient);
      },
      data(client, chunk) {
        if (client.data.refused) {
          client.write(tooManyClients());
          client.end();
          return;
        }
        if (client.data.upstream) send(client.data.upstream, client.data.toUpstream, chunk);
        else client.data.pending.push(new Uint8Array(chunk));
      },
      close(client) {
        clients.delete(client);
        client.data?.upstream?.end();
      },
    },
  });
  return {
    port: server.port,
    // `databaseUrl` with its host and port turned to the gate's, its user, password and database kept.
    url: (databaseUrl: string) => {
      const through = new URL(databaseUrl);
      through.hostname = '127.0.0.1';
      through.port = String(server.port);
      return through.toString();
    },
    open: () => {
      state.full = false;
      state.admitting = 0;
    },
    close: () => (state.full = true),
    admit: (connections: number) => {
      state.full = true;
      state.admitting = connections;
    },
    // New connections go to `next` from now on, as a failover manager moves a service address.
    point: (next: { host: string; port: number }) => {
      state.target = next;
    },
    // Cuts every connection that passed through, as a restart or a pooler would.
    cutAll: () => {
      for (const client of clients) {
        client.data.upstream?.end();
        client.end();
      }
    },
    stop: () => server.stop(true),
  };
}

// An ErrorResponse message: 'E', its length, then (type byte, text, NUL) fields and a final NUL.
function tooManyClients(): Uint8Array {
  const fields = [
    ['S', 'FATAL'],
    ['V', 'FATAL'],
    ['C', '53300'],
    ['M', 'sorry, too many clients already'],
  ];
  const body = Buffer.concat([...fields.map(([type, text]) => Buffer.from(`${type}${text}\0`)), Buffer.from('\0')]);
  const header = Buffer.alloc(5);
  header.write('E', 0);
  header.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([header, body]);
}
