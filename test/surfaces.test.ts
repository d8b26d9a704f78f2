import { expect, test } from 'bun:test';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { uniqueName, useHarness } from './support/harness';

// What integrators build on, kept byte for byte: the OpenAPI document and the MCP tool list. A
// change to either shows up here as a diff against the committed copy, so that it is made on
// purpose (set UPDATE_SURFACES=1 to write the new copy) and never as a side effect of a refactor.
const h = useHarness();
const fixtures = join(import.meta.dir, 'fixtures');

async function compare(name: string, text: string) {
  const file = join(fixtures, name);
  if (process.env.UPDATE_SURFACES === '1') writeFileSync(file, text);
  expect(text).toBe(readFileSync(file, 'utf8'));
}

test('the OpenAPI document is the committed one', async () => {
  const res = await h.app.handle(new Request('http://localhost/openapi/json'));
  expect(res.status).toBe(200);
  await compare('openapi.json', await res.text());
});

test('the MCP tool list is the committed one', async () => {
  const agent = await h.agent(uniqueName('surfaces'));
  const res = await h.app.handle(
    new Request('http://localhost/mcp', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${agent.key}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    }),
  );
  expect(res.status).toBe(200);
  await compare('mcp-tools.json', await res.text());
});
