import type { Socket } from 'bun';

type Link = { upstream: Socket<unknown> | null; pending: Uint8Array[]; refused: boolean };

// A TCP gate in front of the real PostgreSQL. While `full`, each new connection gets the error
// PostgreSQL itself sends when every slot is taken (FATAL 53300 "sorry, too many clients already")
// and is closed; otherwise bytes pass both ways untouched. Connections already open stay open.
export function pgGate(target: { host: string; port: number }) {
  const state = { full: true };
  const clients = new Set<Socket<Link>>();
  const server = Bun.listen<Link>({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      async open(client) {
        clients.add(client);
        client.data = { upstream: null, pending: [], refused: state.full };
        if (client.data.refused) return;
        client.data.upstream = await Bun.connect({
          hostname: target.host,
          port: target.port,
          socket: {
            data: (_, chunk) => void client.write(chunk),
            close: () => void client.end(),
            error: () => void client.end(),
          },
        });
        for (const chunk of client.data.pending) client.data.upstream.write(chunk);
      },
      data(client, chunk) {
        if (client.data.refused) {
          client.write(tooManyClients());
          client.end();
          return;
        }
        if (client.data.upstream) client.data.upstream.write(chunk);
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
    open: () => (state.full = false),
    close: () => (state.full = true),
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
