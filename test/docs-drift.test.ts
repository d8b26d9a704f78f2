import { beforeAll, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { ConfigSchema } from '../src/config';
import { toolList } from '../src/mcp/tools';
import { OAUTH_ROUTES } from '../src/oauth/provider';
import { driftIn, type Vocabulary } from './support/doc-drift';
import { projectDocs, ROOT } from './support/docs';
import { useHarness } from './support/harness';

// Nothing the README and docs/ name in backticks can drift from the code unnoticed: every route
// (against the app's routes, and /api ones against the OpenAPI document), MCP tool and other
// identifier, CLI command and flag (against `ams help`), environment variable (against the
// configuration schema, or code that reads it), package script, repository path and link.
// With PUBLIC_URL, so that the OAuth server's routes are served too.
const h = useHarness({ PUBLIC_URL: 'https://ams.example.com' });
let v: Vocabulary;

beforeAll(async () => {
  const tracked = Bun.spawnSync(['git', 'ls-files', '--cached', '--others', '--exclude-standard'], { cwd: ROOT }).stdout.toString().split('\n').filter(Boolean);
  const codeWords = new Set<string>();
  for (const file of tracked) {
    codeWords.add(`file:${basename(file)}`);
    // This check and its own examples of drift are not code that names anything.
    if (file.endsWith('.md') || /\.(png|lock)$/.test(file) || /(^|\/)docs?-drift(\.test)?\.ts$/.test(file)) continue;
    let text: string;
    try {
      text = readFileSync(join(ROOT, file), 'utf8');
    } catch {
      continue;
    }
    for (const word of text.matchAll(/[A-Za-z_][A-Za-z0-9_]*/g)) codeWords.add(word[0]);
  }
  const help = Bun.spawnSync(['bun', 'src/main.ts', 'help'], { cwd: ROOT, env: { ...process.env, DATABASE_URL: h.db.url } });
  const doc = await h.call('GET', '/openapi/json');
  v = {
    // The OAuth server answers its routes before the app's router, which does not list them.
    routes: [...h.app.routes.map((r) => ({ method: r.method, path: r.path })), ...Object.values(OAUTH_ROUTES).map((path) => ({ method: 'ALL', path }))],
    probe: async (method, path) => (await h.call(method, path)).status !== 404,
    ignored: (path) => Bun.spawnSync(['git', 'check-ignore', '-q', path], { cwd: ROOT }).exitCode === 0,
    apiPaths: Object.keys(doc.body.paths),
    tools: toolList.map((t) => t.name),
    cliHelp: help.stdout.toString(),
    configKeys: Object.keys(ConfigSchema.properties),
    scripts: Object.keys(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts),
    codeWords,
  };
});

test('the CLI prints its commands for the check to read', () => {
  expect(v.cliHelp).toContain('agents create <username>');
});

test('every route, tool, command, flag, variable, script, path and link the docs name exists', async () => {
  expect((await Promise.all(projectDocs().map((doc) => driftIn(doc, v)))).flat()).toEqual([]);
});

test('the reference names everything there is: every tool, every command, every operation', () => {
  const page = (path: string) => readFileSync(join(ROOT, 'docs/reference', path), 'utf8');
  const mcp = page('mcp.md');
  expect(v.tools.filter((tool) => !mcp.includes(`\`${tool}\``))).toEqual([]);
  const cli = page('cli.md');
  const commands = v.cliHelp
    .split('\n')
    .map((line) => line.trim().split(/\s+[<[(]/)[0]!.trim())
    .filter((command) => /^[a-z]/.test(command));
  expect(commands.filter((command) => !cli.includes(`ams ${command}`))).toEqual([]);
  const flags = [...new Set(v.cliHelp.match(/--[a-z][a-z-]*/g))];
  expect(flags.filter((flag) => !cli.includes(`\`${flag}`))).toEqual([]);
  const http = page('http-api.md');
  expect(v.apiPaths.filter((path) => !http.includes(path))).toEqual([]);
});

test('the check finds a route, tool, command, flag, variable, path and link that do not exist', async () => {
  const doc = {
    path: 'docs/example.md',
    text: [
      'Poll `GET /api/inbox` or `GET /api/deliveries`.', // 1: no such route; a real one
      'Call `read_mesage`, then `read_message`.', // 2
      'Run `ams agents remove bob` or `ams agents create bob --webhok https://x`.', // 3
      'Set `WEBHOOK_ALLOW_LOCALS=true`, not `WEBHOOK_ALLOW_LOCAL=true`.', // 4
      'See `src/domain/nowhere.ts` and [the spec](spec/agent-messaging-service.md).', // 5
      'Read [the guide](../README.md#no-such-heading).', // 6
      '```sh',
      'curl -s "$AMS/api/inbox" -H "Authorization: Bearer $BOB"', // 8
      'bun run strat', // 9
      '```',
    ].join('\n'),
  };
  expect(await driftIn(doc, v)).toEqual([
    'docs/example.md:1: `GET /api/inbox`: no such route',
    'docs/example.md:2: `read_mesage`: named nowhere in the code',
    'docs/example.md:3: `ams agents remove bob`: the CLI has no command `ams agents remove` (see `ams help`)',
    'docs/example.md:3: `ams agents create bob --webhok https://x`: `ams agents create` takes no --webhok',
    'docs/example.md:4: `WEBHOOK_ALLOW_LOCALS`: no such configuration variable, and nothing reads it',
    'docs/example.md:5: `src/domain/nowhere.ts`: no such file or folder',
    'docs/example.md:8: `/api/inbox`: no such route',
    'docs/example.md:9: `bun run strat`: package.json has no such script',
    'docs/example.md:5: link to spec/agent-messaging-service.md: no such file',
    'docs/example.md:6: link to ../README.md#no-such-heading: no such heading in README.md',
  ]);
});
