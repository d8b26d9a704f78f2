import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { uniqueName, useHarness, useListening, type TestAgent } from './support/harness';

// `ams` as a newcomer gets it from a checkout: `bun link` (package.json's bin), then run from
// another project's folder, as a coding agent's hook runs it. That folder has a `.env` and a
// bunfig.toml of its own, which are not the service's and must change nothing.
const h = useHarness();
const server = useListening(h);
const ROOT = resolve(import.meta.dir, '..');
const scratch = mkdtempSync(join(tmpdir(), 'ams-command-'));
const bunInstall = join(scratch, 'bun');
const bin = join(bunInstall, 'bin');
const project = join(scratch, 'project');
const serviceEnv = join(scratch, 'service.env');
const { DATABASE_URL: _, AMS_URL: __, ...inherited } = process.env;
let sender: TestAgent;

beforeAll(async () => {
  const linked = Bun.spawnSync(['bun', 'link'], { cwd: ROOT, env: { ...process.env, BUN_INSTALL: bunInstall }, stdout: 'pipe', stderr: 'pipe' });
  expect([linked.exitCode, linked.stderr.toString()]).toEqual([0, '']);
  mkdirSync(project);
  writeFileSync(join(project, '.env'), 'DATABASE_URL=postgres://nobody@127.0.0.1:1/not-the-service\nAMS_URL=http://127.0.0.1:1\n');
  writeFileSync(join(project, 'bunfig.toml'), 'preload = ["./preload.ts"]\n');
  writeFileSync(join(project, 'preload.ts'), 'console.error("the project\'s preload ran");\nprocess.exit(9);\n');
  // The service's settings, as its checkout's `.env` would hold them: its database, local webhooks,
  // and where it listens.
  writeFileSync(serviceEnv, `DATABASE_URL=${h.db.url}\nWEBHOOK_ALLOW_LOCAL=true\nHOST=127.0.0.1\nPORT=${server.port}\n`);
  sender = await h.agent(uniqueName('sender'));
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

async function run(command: string[], env: Record<string, string | undefined> = {}) {
  const child = Bun.spawn(command, {
    cwd: project,
    env: { ...inherited, PATH: `${bin}:${process.env.PATH}`, AMS_ENV_FILE: serviceEnv, ...env },
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  return { stdout, stderr, code };
}

test('`bun link` puts `ams` in Bun\'s global bin folder, as this checkout\'s entry point', () => {
  expect(realpathSync(join(bin, 'ams'))).toBe(join(ROOT, 'src/main.ts'));
});

test('an admin command from another folder uses the service\'s settings, not that folder\'s', async () => {
  const name = uniqueName('linked');
  const created = await run(['ams', 'agents', 'create', name, '--webhook', 'http://127.0.0.1:9/hook']);
  expect([created.code, created.stderr]).toEqual([0, '']);
  expect(JSON.parse(created.stdout)).toMatchObject({ username: name, webhookUrl: 'http://127.0.0.1:9/hook' });
  const [row] = await h.db.sql`select webhook_url from agents where username = ${name}`;
  expect(row!.webhook_url).toBe('http://127.0.0.1:9/hook');
  // The environment wins over the file, and the refusal names the setting that would allow it.
  const strict = await run(['ams', 'webhooks', 'set', name, 'http://127.0.0.1:9/other'], { WEBHOOK_ALLOW_LOCAL: 'false' });
  expect(strict).toEqual({ stdout: '', stderr: 'webhookUrl must use https:// unless WEBHOOK_ALLOW_LOCAL=true is set (for the server, and for ams when ams registers the webhook)\n', code: 1 });
});

test('the example hook finds `ams` on the PATH and the service where its settings put it', async () => {
  const agent = await h.agent(uniqueName('hooked'));
  const threadId = await h.thread(sender, [agent], 'From the hook');
  const hook = join(ROOT, 'examples/hooks/check-mail.sh');
  expect(await run([hook, '1'], { AMS_AGENT_KEY: agent.key })).toEqual({ stdout: '', stderr: '', code: 0 });
  const posted = await h.post(sender, threadId, 'anything new?');
  expect(await run([hook, '1'], { AMS_AGENT_KEY: agent.key })).toEqual({
    stdout: `[From the hook] ${sender.username}: anything new? (message ${posted.id})\n`,
    stderr: '',
    code: 0,
  });
  // Without `ams` on the PATH it says what to do, and exits 1 (not 127, nor 2, which blocks a host).
  expect(await run([hook, '1'], { AMS_AGENT_KEY: agent.key, PATH: '/usr/bin:/bin' })).toEqual({
    stdout: '',
    stderr:
      'check-mail.sh: ams is not on the PATH. Run `bun link` in the service\'s checkout and put $(bun pm bin -g) on the PATH, or set AMS to the command that runs ams.\n',
    code: 1,
  });
});
