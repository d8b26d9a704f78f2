import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { uniqueName, useHarness } from './support/harness';

// The official MCP conformance suite's server scenarios against /mcp on a real listening server,
// once for each protocol version it speaks: the scenarios each version's specification requires.
// The suite connects without credentials, so a small proxy in front adds the agent key; it passes
// Origin through, which the DNS-rebinding scenario sets. Scenarios that do not apply to a
// tools-only server are listed, with why, in each version's baseline.
const h = useHarness();
const root = join(import.meta.dir, '..');
const baselines = {
  '2025-11-25': join(root, 'test/fixtures/mcp-conformance-baseline.yml'),
  '2026-07-28': join(root, 'test/fixtures/mcp-conformance-baseline-2026-07-28.yml'),
};
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

// Runs the scenarios a version requires; answers the summary, the exit code and any error printed.
async function conformance(version: keyof typeof baselines) {
  // The suite's command line needs a newer Node.js than CI machines carry; Bun runs it as is.
  const cli = join(root, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
  const url = `http://127.0.0.1:${proxy.port}/mcp`;
  const child = Bun.spawn(['bun', cli, 'server', '--url', url, '--requirements', version, '--expected-failures', baselines[version]], {
    cwd: await mkdtemp(join(tmpdir(), 'ams-conformance-')),
    stdout: 'pipe',
    stderr: 'pipe',
    env: { ...process.env, NO_COLOR: '1' },
  });
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  return { summary: stdout.slice(stdout.indexOf('=== SUMMARY ===')), code, error: stderr.includes('Error') ? stderr : '' };
}

test('the official conformance suite passes every 2025-11-25 scenario that applies to a server of tools and one resource', async () => {
  const { summary, code, error } = await conformance('2025-11-25');
  for (const scenario of ['server-initialize', 'ping', 'tools-list', 'resources-list', 'dns-rebinding-protection']) {
    expect(summary).toMatch(new RegExp(`✓ ${scenario}: [1-9]\\d* passed, 0 failed`));
  }
  expect([code, error]).toEqual([0, '']);
}, 120_000);

test('the official conformance suite passes every 2026-07-28 scenario that applies to a server of tools and one resource', async () => {
  const { summary, code, error } = await conformance('2026-07-28');
  for (const scenario of ['tools-list', 'resources-list', 'sep-2164-resource-not-found', 'dns-rebinding-protection', 'http-header-validation']) {
    expect(summary).toMatch(new RegExp(`✓ ${scenario}: [1-9]\\d* passed, 0 failed`));
  }
  expect([code, error]).toEqual([0, '']);
}, 120_000);
