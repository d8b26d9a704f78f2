import { createServer } from 'node:net';

// A port nothing listens on right now (the system picks it), so that runs side by side do not
// collide the way ports derived from a process id can.
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}
