import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

// Reading the project's Markdown as the drift check (test/docs-drift.test.ts) and the doc tests
// (test/docs-run.test.ts) need it: the files, their inline code, links, headings and fenced blocks,
// each with the line it starts on.

export const ROOT = resolve(import.meta.dir, '../..');

export type Doc = { path: string; text: string };

// README, CONTRIBUTING and everything under docs/: what a reader of the repository reads.
export function projectDocs(): Doc[] {
  const walk = (dir: string): string[] =>
    readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith('.md') ? [join(dir, e.name)] : [],
    );
  return ['README.md', 'CONTRIBUTING.md', ...walk('docs')]
    .filter((path) => existsSync(join(ROOT, path)))
    .map((path) => ({ path, text: readFileSync(join(ROOT, path), 'utf8') }));
}

export type Block = { lang: string; body: string; line: number; directive: string | null };
export type Span = { text: string; line: number };

// The fenced blocks, with the `<!-- doc-test: … -->` comment right above one, if any.
export function fencedBlocks(text: string): Block[] {
  const lines = text.split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(```+|~~~+)\s*([\w-]*)/.exec(lines[i]!);
    if (!open) continue;
    const fence = open[2]!;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !lines[i]!.trimStart().startsWith(fence); i++) body.push(lines[i]!);
    let above = start - 1;
    while (above >= 0 && lines[above]!.trim() === '') above--;
    const directive = above >= 0 ? /^<!--\s*doc-test:\s*(.+?)\s*-->$/.exec(lines[above]!.trim())?.[1] ?? null : null;
    blocks.push({ lang: open[3]!, body: body.join('\n'), line: start + 1, directive });
  }
  return blocks;
}

// The text outside fenced blocks, line by line, blank where a block stands (so line numbers hold).
function prose(text: string): string[] {
  const lines = text.split('\n');
  let fence: string | null = null;
  return lines.map((line) => {
    const marker = /^\s*(```+|~~~+)/.exec(line)?.[1];
    if (fence === null && marker) {
      fence = marker;
      return '';
    }
    if (fence !== null) {
      if (line.trimStart().startsWith(fence)) fence = null;
      return '';
    }
    return line;
  });
}

// Every `inline code` span outside fenced blocks.
export function inlineCode(text: string): Span[] {
  return prose(text).flatMap((line, i) => [...line.matchAll(/(`+)(.+?)\1/g)].map((m) => ({ text: m[2]!.trim(), line: i + 1 })));
}

// Every Markdown link's target outside fenced blocks (not images' or absolute URLs' alone).
export function links(text: string): Span[] {
  return prose(text).flatMap((line, i) =>
    [...line.replace(/`[^`]*`/g, '').matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => ({ text: m[1]!, line: i + 1 })),
  );
}

// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens; repeats get -1, -2 ….
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of prose(text)) {
    const heading = /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const base = heading[1]!
      .replace(/`/g, '')
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const m of text.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) out.add(m[1]!);
  return out;
}

// Whether a path (relative to the repository, a glob's `*` allowed) names something in the tree.
export function existsInTree(path: string): boolean {
  const clean = path.replace(/[#?].*$/, '').replace(/\/$/, '');
  if (!clean.includes('*')) return existsSync(join(ROOT, clean));
  const parts = clean.split('/');
  const match = (dir: string, rest: string[]): boolean => {
    if (rest.length === 0) return true;
    const [head, ...tail] = rest;
    if (!head!.includes('*')) return existsSync(join(dir, head!)) && (tail.length === 0 || statSync(join(dir, head!)).isDirectory()) && match(join(dir, head!), tail);
    const pattern = new RegExp(`^${head!.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`);
    return existsSync(dir) && statSync(dir).isDirectory() && readdirSync(dir).some((name) => pattern.test(name) && match(join(dir, name), tail));
  };
  return match(ROOT, parts);
}

// Where a link in `from` points, relative to the repository; null for a link out of it.
export function linkTarget(from: string, target: string): { path: string; anchor: string | null } | null {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) return null;
  const [file, anchor = null] = target.split('#') as [string, string | undefined];
  const path = file === '' ? from : relative(ROOT, resolve(ROOT, dirname(from), file));
  return { path, anchor };
}
