import { expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { SECURITY_HEADERS, VENDORED } from '../src/dashboard/pages';
import { CSRF_HEADER, CSRF_VALUE, DASHBOARD_API, SESSION_ENDED, STREAM_PATH } from '../src/web/dashboard-protocol';
import { useDashboardHarness } from './support/dashboard';

// The dashboard's browser code (src/dashboard/web): typed modules, served bundled as plain
// JavaScript, that branch on a refusal's code and never on its sentence, and take what they share
// with the server from the modules the server reads it from.
const h = useDashboardHarness();
const WEB = join(import.meta.dir, '../src/dashboard/web');

function modules(dir = WEB): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return modules(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

const parsed = modules().map((path) => ({
  name: relative(WEB, path),
  source: ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true),
}));

const visit = (node: ts.Node, each: (node: ts.Node) => void) => {
  each(node);
  node.forEachChild((child) => visit(child, each));
};

// What holds a sentence in the browser code: an error's message, a refusal's `error`, a sentence.
const SENTENCE_NAMES = new Set(['message', 'error', 'sentence']);
const nameOf = (node: ts.Node) =>
  ts.isIdentifier(node) ? node.text : ts.isPropertyAccessExpression(node) ? node.name.text : null;
const READS_TEXT = new Set([
  'startsWith', 'endsWith', 'includes', 'indexOf', 'lastIndexOf', 'match', 'matchAll', 'search', 'slice', 'substring',
  'substr', 'split', 'replace', 'replaceAll', 'toLowerCase', 'toUpperCase', 'trim', 'at', 'charAt', 'localeCompare', 'length',
]);
const COMPARES = new Set([
  ts.SyntaxKind.EqualsEqualsEqualsToken,
  ts.SyntaxKind.ExclamationEqualsEqualsToken,
  ts.SyntaxKind.EqualsEqualsToken,
  ts.SyntaxKind.ExclamationEqualsToken,
]);

// Every place a sentence is compared, searched, cut or matched, as "file:line: code".
function sentenceReads(file: ts.SourceFile): string[] {
  const found: string[] = [];
  const flag = (node: ts.Node) =>
    found.push(`${file.fileName.split('/').pop()}:${file.getLineAndCharacterOfPosition(node.getStart()).line + 1}: ${node.getText()}`);
  visit(file, (node) => {
    const name = nameOf(node);
    if (name === null || !SENTENCE_NAMES.has(name)) return;
    const parent = node.parent;
    if (ts.isBinaryExpression(parent) && COMPARES.has(parent.operatorToken.kind)) flag(parent);
    else if (ts.isPropertyAccessExpression(parent) && parent.expression === node && READS_TEXT.has(parent.name.text)) flag(parent);
    else if (ts.isCallExpression(parent) && parent.arguments.includes(node as ts.Expression)) {
      const callee = nameOf(parent.expression);
      if (callee === 'test' || callee === 'exec' || callee === 'match' || callee === 'search') flag(parent);
    } else if (ts.isSwitchStatement(parent) && parent.expression === node) flag(parent);
  });
  return found;
}

test('the script is served as one JavaScript module, bundled from the typed modules, under the pages\' policy', async () => {
  const res = await h.send('GET', '/dashboard/assets/dashboard.js');
  expect([res.status, res.headers.get('content-type'), res.headers.get('cache-control')]).toEqual([200, 'text/javascript; charset=utf-8', 'no-cache']);
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) expect([name, res.headers.get(name)]).toEqual([name, value]);
  const script = String(res.body);
  // Plain JavaScript: a parser for JavaScript alone reads it (a type annotation would fail it), and
  // it imports nothing but what the page's import map names: every module of ours is inside it.
  // It imports all the map names, uPlot once a page draws a chart (shared/chart.ts is bundled).
  const scanned = new Bun.Transpiler({ loader: 'js' }).scan(script);
  const page = await h.send('GET', '/dashboard/sign-in');
  const map = JSON.parse(/<script type="importmap">(.*?)<\/script>/.exec(String(page.body))![1]!);
  const charts = script.includes('dashboard/web/shared/chart.ts');
  expect([...new Set(scanned.imports.map((i) => i.path))].sort()).toEqual(
    Object.keys(map.imports)
      .filter((name) => charts || name !== 'uplot')
      .sort(),
  );
  // Every page module is in it.
  for (const pageModule of parsed.filter((m) => m.name.startsWith('pages/'))) expect(script).toContain(`dashboard/web/${pageModule.name}`);
});

test('the chart module leaves uPlot to the import map, as the bundler is told to', async () => {
  const page = await h.send('GET', '/dashboard/sign-in');
  const map = JSON.parse(/<script type="importmap">(.*?)<\/script>/.exec(String(page.body))![1]!);
  expect(map.imports.uplot).toBe(`/dashboard/assets/uplot-${VENDORED.uplot}.js`);
  const built = await Bun.build({ entrypoints: [join(WEB, 'shared/chart.ts')], external: Object.keys(map.imports), target: 'browser', format: 'esm' });
  expect(built.success).toBe(true);
  const chart = await built.outputs[0]!.text();
  expect([...new Set(new Bun.Transpiler({ loader: 'js' }).scan(chart).imports.map((i) => i.path))].sort()).toEqual(['htm', 'preact', 'preact/hooks', 'uplot']);
  expect(chart).not.toContain('uPlot.esm.js');
  expect(chart.length).toBeLessThan(20_000);
});

test('no browser module reads a sentence: the pages branch on a refusal\'s code and field', () => {
  expect(parsed.length).toBeGreaterThan(10);
  expect(parsed.flatMap((m) => sentenceReads(m.source))).toEqual([]);
});

test('the check finds the sentence reads the untyped script had', () => {
  const old = ts.createSourceFile(
    'dashboard.js',
    [
      "sessionEnded(error, error.startsWith('You signed out') ? 'signed-out' : 'expired');",
      'const fieldOf = (error, names) => (error ? names.find((name) => error.startsWith(`${name} `)) ?? null : null);',
      "const agentError = action.error?.startsWith('agent: ') ? action.error.slice(7) : null;",
      "if (res.message === 'Sign in first') stop();",
      'if (/expired/.test(payload.error)) stop();',
    ].join('\n'),
    ts.ScriptTarget.Latest,
    true,
  );
  expect(sentenceReads(old).map((line) => line.split(':')[1])).toEqual(['1', '2', '3', '3', '4', '5']);
});

test('no browser module restates a sentence or a name the server holds', () => {
  const shared = new Set<string>([CSRF_HEADER, CSRF_VALUE, DASHBOARD_API, STREAM_PATH, ...Object.values(SESSION_ENDED).map((end) => end.sentence)]);
  const restated = parsed.flatMap((m) => {
    const found: string[] = [];
    visit(m.source, (node) => {
      if ((ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) && shared.has(node.text)) found.push(`${m.name}: ${node.text}`);
    });
    return found;
  });
  expect(restated).toEqual([]);
});
