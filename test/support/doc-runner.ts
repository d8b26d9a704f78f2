import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fencedBlocks, ROOT } from './docs';

// Runs a page's shell blocks as a reader would: verbatim, in order, in one bash session from the
// checkout's root (`set -a`, so that what a block sets reaches the commands it starts), stopping at
// the first command that fails. A directive in an HTML comment right above a block changes how it
// runs (docs/README.md, "How the docs are checked"):
//   <!-- doc-test: skip (reason) -->                      not run
//   <!-- doc-test: background -->                         started and left running until the page ends
//   <!-- doc-test: background; ready <url> -->            and the next block waits until <url> answers 2xx
export type PageRun = { ok: boolean; output: string; failedAt: string | null };

const SHELL_LANGS = new Set(['sh', 'bash', 'shell']);
const READY_WITHIN_S = 60;

type Step = { line: number; body: string; background: boolean; ready: string | null };
type PageStep = Step & { path: string };

export function stepsOf(text: string): Step[] {
  return fencedBlocks(text)
    .filter((b) => SHELL_LANGS.has(b.lang) && !b.directive?.startsWith('skip'))
    .map((b) => {
      const background = b.directive?.startsWith('background') ?? false;
      const ready = /ready\s+(\S+)/.exec(b.directive ?? '')?.[1] ?? null;
      if (b.directive && !background) throw new Error(`line ${b.line}: unknown doc-test directive "${b.directive}"`);
      return { line: b.line, body: b.body, background, ready };
    });
}

// The tests' own database is not the reader's: a page gets the one it is given, or none.
function withoutDatabase(env: NodeJS.ProcessEnv): Record<string, string> {
  const { DATABASE_URL: _, ...rest } = env;
  return Object.fromEntries(Object.entries(rest).filter((e): e is [string, string] => e[1] !== undefined));
}

const quote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

// The script a page's steps make. Each background block is a bash of its own, in a process group
// of its own so that everything it started goes when the page ends.
function script(steps: PageStep[], work: string): string {
  const lines = [
    'set -euo pipefail -a',
    `cd ${quote(ROOT)}`,
    '__groups=()',
    'trap \'for g in "${__groups[@]}"; do kill -TERM -- -"$g" 2>/dev/null || true; done; sleep 0.5; for g in "${__groups[@]}"; do kill -KILL -- -"$g" 2>/dev/null || true; done\' EXIT',
  ];
  steps.forEach((step, i) => {
    lines.push(`echo ${quote(`::: ${step.path}:${step.line}`)} >&2`);
    if (!step.background) {
      lines.push(step.body);
      return;
    }
    const file = join(work, `background-${i}.sh`);
    writeFileSync(file, `set -euo pipefail\n${step.body}\n`);
    lines.push(`setsid bash ${quote(file)} > ${quote(`${file}.log`)} 2>&1 < /dev/null &`, '__groups+=($!)');
    if (step.ready) {
      lines.push(
        `for __i in $(seq ${READY_WITHIN_S * 10}); do curl -sf -o /dev/null ${quote(step.ready)} && break; ` +
          `if [ "$__i" = ${READY_WITHIN_S * 10} ]; then echo ${quote(`${step.ready} did not answer within ${READY_WITHIN_S} s; the block's output:`)} >&2; cat ${quote(`${file}.log`)} >&2; exit 1; fi; sleep 0.1; done`,
      );
    }
  });
  return `${lines.join('\n')}\n`;
}

// Runs a page (`path` names it in the output) with `env` on top of this process's environment, in
// a home of its own, so that `bun link` and the PATH a page sets up touch nothing of the machine's.
// `prelude`: blocks a reader has run before this page (the README's setup, for a guide), run first
// and named as such.
export async function runPage(path: string, text: string, env: Record<string, string>, timeoutMs: number, prelude = ''): Promise<PageRun> {
  const work = mkdtempSync(join(tmpdir(), 'ams-doc-'));
  try {
    const home = join(work, 'home');
    mkdirSync(home);
    const file = join(work, 'page.sh');
    writeFileSync(file, script([...stepsOf(prelude).map((s) => ({ ...s, path: `${path} (what the README sets up first)` })), ...stepsOf(text).map((s) => ({ ...s, path }))], work));
    // Files, not pipes: Bun's pipes are sockets, which a command writing to /dev/stderr cannot open.
    const out = join(work, 'out.log');
    const err = join(work, 'err.log');
    const child = Bun.spawn(['bash', file], {
      cwd: ROOT,
      env: {
        ...withoutDatabase(process.env),
        HOME: home,
        // Packages come from the machine's cache, as they would for the reader.
        BUN_INSTALL_CACHE_DIR: process.env.BUN_INSTALL_CACHE_DIR ?? join(homedir(), '.bun/install/cache'),
        ...env,
      },
      stdout: Bun.file(out),
      stderr: Bun.file(err),
    });
    const timer = setTimeout(() => child.kill('SIGTERM'), timeoutMs);
    const code = await child.exited;
    clearTimeout(timer);
    const [stdout, stderr] = [readFileSync(out, 'utf8'), readFileSync(err, 'utf8')];
    const output = `${stdout}${stderr}`;
    const markers = [...stderr.matchAll(/^::: (.+)$/gm)].map((m) => m[1]!);
    return { ok: code === 0, output, failedAt: code === 0 ? null : (markers.at(-1) ?? path) };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
