import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const SRC = resolve(import.meta.dir, '..');

// A macro (script.ts imports it with { type: 'macro' }): Bun runs it when it reads the importing
// module, as `bun run` starts or as `bun build --compile` builds, and puts what it answers in place
// of the call. It answers the text of the dashboard's browser code: the entry and every module it
// imports by a relative path, by their paths under src/. So the compiled executable carries the
// sources, and no build step comes between editing a module and starting the service.
export function browserSources(): Record<string, string> {
  const transpiler = new Bun.Transpiler({ loader: 'ts' });
  const sources: Record<string, string> = {};
  const read = (file: string) => {
    const path = relative(SRC, file);
    if (path in sources) return;
    const text = readFileSync(file, 'utf8');
    sources[path] = text;
    for (const { path: imported } of transpiler.scanImports(text)) if (imported.startsWith('.')) read(resolve(dirname(file), imported));
  };
  read(join(SRC, 'dashboard/web/dashboard.ts'));
  return sources;
}
