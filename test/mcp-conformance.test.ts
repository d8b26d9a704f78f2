import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { uniqueName, useHarness } from './support/harness';

// The official MCP conformance suite's server scenarios against /mcp on a real listening server.
// The suite connects without credentials, so a small proxy in front adds the agent key; it passes
// Origin through, which the DNS-rebinding scenario sets. Scenarios that do not apply to a
// tools-only server are listed, with why, in the baseline.
const h = useHarness();
const root = join(import.meta.dir, '..');
const baseline = join(root, 'test/fixtures/mcp-conformance-baseline.yml');
let proxy: ReturnType<typeof Bun.serve>;

beforeAll(async () => {
  const agent = await h.agent(uniqueName('conformance'));
  h.app.listen({ port: 0, hostname: '127.0.0.1' });
  const target = `http://127.0.0.1:${h.app.server!.port}`;
  proxy = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    idleTimeout: 0,
    fetch(request) {
      const url = new URL(request.url);
      const headers = new Headers(request.headers);
      headers.set('authorization', `Bearer ${agent.key}`);
      headers.delete('host');
      return fetch(target + url.pathname + url.search, { method: request.method, headers, body: request.body, redirect: 'manual' });
    },
  });
});

afterAll(async () => {
  proxy?.stop(true);
  await h.app.stop(true);
});

test('the official conformance suite passes every scenario that applies to a server of tools and one resource', async () => {
  // The suite's command line needs a newer Node.js than CI machines carry; Bun runs it as is.
  const cli = join(root, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
  const child = Bun.spawn(['bun', cli, 'server', '--url', `http://127.0.0.1:${proxy.port}/mcp`, '--expected-failures', baseline], {
    cwd: await mkdtemp(join(tmpdir(), 'ams-conformance-')),
    stdout: 'pipe',
    stderr: 'pipe',
    env: { ...process.env, NO_COLOR: '1' },
  });
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  const summary = stdout.slice(stdout.indexOf('=== SUMMARY ==='));
  for (const scenario of ['server-initialize', 'ping', 'tools-list', 'resources-list', 'dns-rebinding-protection']) {
    expect(summary).toMatch(new RegExp(`✓ ${scenario}: [1-9]\\d* passed, 0 failed`));
  }
  expect([code, stderr.includes('Error') ? stderr : '']).toEqual([0, '']);
}, 120_000);
