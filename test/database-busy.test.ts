import { afterAll, expect, test } from 'bun:test';
import { loadConfig } from '../src/config';
import { createLogger } from '../src/log';
import { createService } from '../src/service';
import { useHarness } from './support/harness';
import { pgGate } from './support/pg-gate';
import { eventually } from './support/receiver';

// PostgreSQL out of connections while an instance starts: it waits, saying so, and starts once a
// slot frees, instead of exiting with "sorry, too many clients already".
const h = useHarness();
const stops: (() => unknown)[] = [];
afterAll(async () => {
  for (const stop of stops.reverse()) await stop();
});

test('a starting instance waits for PostgreSQL to have a free connection, then starts', async () => {
  const target = new URL(h.db.url);
  const gate = pgGate({ host: target.hostname, port: Number(target.port || 5432) });
  stops.push(gate.stop);
  const lines: Record<string, unknown>[] = [];
  const log = createLogger('info', (line) => lines.push(JSON.parse(line)));
  const config = loadConfig({ DATABASE_URL: gate.url(h.db.url), DB_POOL_SIZE: '2' });
  let started = false;
  const starting = createService(config, { log, http: true, worker: false }).then((service) => {
    started = true;
    stops.push(service.stop);
    return service;
  });
  await eventually(async () => lines.filter((l) => l.event === 'database_busy').length >= 3);
  expect(started).toBe(false);
  const busy = lines.filter((l) => l.event === 'database_busy').map(({ time: _, ...l }) => l);
  expect(busy.slice(0, 3)).toEqual([
    { level: 'warn', event: 'database_busy', attempt: 1, error: 'sorry, too many clients already', retryInMs: 250 },
    { level: 'warn', event: 'database_busy', attempt: 2, error: 'sorry, too many clients already', retryInMs: 500 },
    { level: 'warn', event: 'database_busy', attempt: 3, error: 'sorry, too many clients already', retryInMs: 1000 },
  ]);
  gate.open();
  const service = await starting;
  const res = await service.app.handle(new Request('http://localhost/health'));
  expect(res.status).toBe(200);
  expect(lines.filter((l) => l.level === 'error')).toEqual([]);
}, 30_000);
