import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

// Playwright runs its driver in this process and hands each message between the test's client and
// the driver to its own setImmediate, counting on those to run in order. Under Bun they now and
// then do not: one waits, sometimes seconds, while later ones run (measured: a Response's creation
// ran after the event that names it, and the client threw "Object with guid response@… was not
// bound in the connection" where no test can catch it). So each side's messages wait in a queue
// and every callback delivers the oldest, scheduling one more while any are left, so that none
// waits on a late callback either.
type Connection = { onmessage: (message: unknown) => void; dispatch: (message: unknown) => unknown; toImpl?: (x: unknown) => Connection };
function deliverInOrder(deliver: (message: unknown) => unknown) {
  const queue: unknown[] = [];
  const next = () => {
    if (queue.length === 0) return;
    const message = queue.shift();
    if (queue.length > 0) setImmediate(next);
    deliver(message);
  };
  return (message: unknown) => {
    queue.push(message);
    setImmediate(next);
  };
}
const client = (chromium as unknown as { _connection: Connection })._connection;
const driver = client.toImpl!(client);
driver.onmessage = deliverInOrder((message) => client.dispatch(message));
client.onmessage = deliverInOrder((message) => driver.dispatch(message));

// Debian's Chromium, headless, in a fresh profile. The flags keep it from reaching for the
// network on its own (updates, sync, background requests), which a closed machine refuses.
export async function launchChromium(viewport: { width: number; height: number }): Promise<{ context: BrowserContext; close: () => Promise<void> }> {
  const userDataDir = mkdtempSync(join(tmpdir(), 'ams-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport,
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}
