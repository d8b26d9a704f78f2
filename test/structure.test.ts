import { expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

// The shape of src/: the domain and the web kernel (src/web: the envelope, the one error mapping,
// request ids, body limits, authentication, metrics) import no door, no door imports another (what
// two doors share lives in the domain or the kernel; src/app.ts and src/service.ts compose them),
// and no module imports itself round a cycle (a cycle is a sign that a rule sits in the wrong
// module). Type imports count: they couple modules as much as any other.
const root = resolve(import.meta.dir, '../src');
const DOORS = ['http', 'mcp', 'a2a', 'dashboard', 'oauth', 'cli', 'webhooks'];

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return /\.ts$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

const files = sources(root);
const imports = new Map<string, string[]>(
  files.map((file) => {
    const text = readFileSync(file, 'utf8');
    const targets = [...text.matchAll(/^(?:import|export)\s[^'";]*?from\s+'(\.[^']+)'/gm)]
      .map((m) => resolve(dirname(file), m[1]!))
      .map((path) => (path.endsWith('.ts') ? path : `${path}.ts`))
      .filter((path) => files.includes(path));
    return [relative(root, file), targets.map((path) => relative(root, path))];
  }),
);
const area = (file: string) => (file.includes('/') ? file.split('/')[0]! : file);

test('no import cycles', () => {
  const cycles: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (file: string) => {
    state.set(file, 'open');
    path.push(file);
    for (const next of imports.get(file) ?? []) {
      if (state.get(next) === 'open') cycles.push([...path.slice(path.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    path.pop();
    state.set(file, 'done');
  };
  for (const file of imports.keys()) if (!state.has(file)) visit(file);
  expect(cycles).toEqual([]);
});

test('the web kernel imports no door', () => {
  const found = [...imports].flatMap(([file, targets]) =>
    area(file) === 'web' ? targets.filter((t) => DOORS.includes(area(t))).map((t) => `${file} -> ${t}`) : [],
  );
  expect(found).toEqual([]);
});

test('the domain imports no door', () => {
  const found = [...imports].flatMap(([file, targets]) =>
    area(file) === 'domain' ? targets.filter((t) => DOORS.includes(area(t))).map((t) => `${file} -> ${t}`) : [],
  );
  expect(found).toEqual([]);
});

test('no door imports another door', () => {
  const found = [...imports]
    .flatMap(([file, targets]) =>
      DOORS.includes(area(file)) ? targets.filter((t) => DOORS.includes(area(t)) && area(t) !== area(file)).map((t) => `${file} -> ${t}`) : [],
    )
    .sort();
  expect(found).toEqual([]);
});
