import { createServer } from 'node:net';

// A port nothing listens on right now: the kernel's pick for port 0, let go again. A port derived
// from anything else (the process id, say) may be taken by another test run on the same machine.
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
