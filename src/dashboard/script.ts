import { browserSources } from './script-sources' with { type: 'macro' };

// Where the sources are put for the bundler: a path that names no file on disk.
const ROOT = '/dashboard-sources/';

// The dashboard's script: its typed modules (src/dashboard/web) bundled into one ES module for the
// browser, as plain JavaScript. The modules named in `external` (Preact and htm) are left to the
// page's import map. Modules import each other by their file names (./api.ts), as the bundler
// finds sources given as text only by their exact paths.
export async function bundleScript(external: string[]): Promise<string> {
  const sources = browserSources();
  const built = await Bun.build({
    entrypoints: [`${ROOT}dashboard/web/dashboard.ts`],
    files: Object.fromEntries(Object.entries(sources).map(([path, text]) => [ROOT + path, text])),
    external,
    target: 'browser',
    format: 'esm',
  });
  if (!built.success || built.outputs.length !== 1) throw new AggregateError(built.logs, 'The dashboard script did not build.');
  return built.outputs[0]!.text();
}
