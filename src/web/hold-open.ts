import type { Server } from 'bun';

// Bun drops a connection that stays silent past its idleTimeout (10 s by default), and a request
// held open for the inbox wait is silent until it answers; give that one request room to finish.
export function holdOpen(server: Server<unknown> | null, request: Request, seconds: number): void {
  server?.timeout(request, Math.ceil(seconds) + 30);
}
