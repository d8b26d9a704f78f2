import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase } from './support/database';
import { runPage, stepsOf } from './support/doc-runner';
import { ROOT } from './support/docs';
import { freePort } from './support/ports';

// The README's walkthrough and every guide's commands, run verbatim against a service each page
// starts itself, as a reader would (test/support/doc-runner.ts). The pages say
// http://localhost:3000, so that port must be free; each page gets a database of its own.
const PAGE_TIMEOUT_MS = 150_000;
const GUIDES = join(ROOT, 'docs/guides');
const guides = readdirSync(GUIDES).filter((f) => f.endsWith('.md')).sort();
// What the README asks of a reader before any guide: `ams` on the PATH.
const AMS_ON_PATH = '```sh\nbun link >/dev/null 2>&1\nexport PATH="$HOME/.bun/bin:$PATH"\n```\n';
let dataDir: string;

const portFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });

beforeAll(async () => {
  if (!(await portFree(3000))) throw new Error('Port 3000 is taken: the docs address the service at http://localhost:3000, so their tests need it free.');
  dataDir = mkdtempSync(join(tmpdir(), 'ams-doc-data-'));
});
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const failure = (run: { failedAt: string | null; output: string }) => `failed at ${run.failedAt}:\n${run.output.split('\n').slice(-60).join('\n')}`;

test('README.md: the two commands start the service on its embedded PostgreSQL, and the first conversation runs', async () => {
  const run = await runPage('README.md', readFileSync(join(ROOT, 'README.md'), 'utf8'), {
    DATA_DIR: join(dataDir, 'readme'),
    EMBEDDED_PG_PORT: String(await freePort()),
  }, PAGE_TIMEOUT_MS);
  expect(run.ok ? 'ran' : failure(run)).toBe('ran');
}, PAGE_TIMEOUT_MS + 10_000);

describe('every guide', () => {
  test.each(guides)('docs/guides/%s runs as written', async (guide) => {
    const database = await createTestDatabase();
    try {
      const text = readFileSync(join(GUIDES, guide), 'utf8');
      const run = await runPage(`docs/guides/${guide}`, text, { DATABASE_URL: database.url, DATA_DIR: join(dataDir, guide) }, PAGE_TIMEOUT_MS, AMS_ON_PATH);
      expect(run.ok ? 'ran' : failure(run)).toBe('ran');
    } finally {
      await database.drop();
    }
  }, PAGE_TIMEOUT_MS + 10_000);
});

test('the runner stops at a broken step and names it: a wrong route, a command that fails', async () => {
  const page = [
    '# A page with a mistake',
    '',
    '<!-- doc-test: background; ready http://localhost:3000/health -->',
    '```sh',
    'ams serve',
    '```',
    '',
    '```sh',
    'curl -sf localhost:3000/health > /dev/null',
    '```',
    '',
    '```sh',
    'curl -sf localhost:3000/api/inbox -H "Authorization: Bearer agt_x"',
    '```',
    '',
    '```sh',
    'echo never reached',
    '```',
  ].join('\n');
  const database = await createTestDatabase();
  try {
    const run = await runPage('docs/example.md', page, { DATABASE_URL: database.url }, PAGE_TIMEOUT_MS, AMS_ON_PATH);
    expect([run.ok, run.failedAt]).toEqual([false, 'docs/example.md:12']);
    expect(run.output).not.toContain('never reached');
  } finally {
    await database.drop();
  }
}, PAGE_TIMEOUT_MS);

test('a directive it does not know is an error, not a block run some other way', () => {
  expect(() => stepsOf('<!-- doc-test: sometimes -->\n```sh\necho hi\n```\n')).toThrow('line 2: unknown doc-test directive "sometimes"');
});
