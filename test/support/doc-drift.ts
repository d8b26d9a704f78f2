import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { anchors, existsInTree, fencedBlocks, inlineCode, links, linkTarget, ROOT, type Doc } from './docs';

// What the docs may name, read from the code itself: the routes the app serves, the OpenAPI
// document's paths, the MCP tools, the CLI's commands and flags (its own help), the configuration
// variables, the package scripts, and the words of every file that is not a doc (for identifiers
// such as log events, metrics and columns, and variables read outside the configuration).
export type Vocabulary = {
  routes: { method: string; path: string }[];
  // Asks the app whether it serves a route its table does not list (the OAuth server's, mounted
  // before routing): anything but a 404.
  probe: (method: string, path: string) => Promise<boolean>;
  apiPaths: string[];
  tools: string[];
  cliHelp: string;
  configKeys: string[];
  scripts: string[];
  codeWords: Set<string>;
  // Whether git ignores a path: what a run writes (bench results, profiles), named but not committed.
  ignored: (path: string) => boolean;
};

export type Finding = string;

const METHODS = 'GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS';
const ROUTE_SPAN = new RegExp(`^(?:(${METHODS})\\s+)?(\\/(?:api|dashboard|mcp|a2a|health|metrics|openapi|oauth|\\.well-known)(?:[/?#]\\S*)?)$`);
const ENV_SPAN = /^([A-Z][A-Z0-9]*_[A-Z0-9_]*)(?:=\S*)?$/;
const IDENTIFIER_SPAN = /^([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?:\(\))?$/;
// A path into the repository: below one of its folders, or any relative path to a file with an
// extension (a MIME type such as text/event-stream has none).
const TREE_PREFIX = /^(?:\.\/)?((?:src|docs|sql|test|test-faults|test-upgrade|bench|examples|deploy|patches|\.ci)\/[^\s:]*|\w[\w.-]*(?:\/[\w.-]+)*\/[\w-]+\.[a-z]{1,5})$/;

// Names of PostgreSQL's (settings, functions, views) or other programs' that a line may explain.
const foreignName = (name: string, line: string) =>
  /^(pg_|track_|log_|work_mem$|jwks_uri$|fmgr_)/.test(name) || /PostgreSQL|pg_stat|setting|OAuth|OpenID/.test(line);

// A documented path segment's placeholders, standing for any value: {threadId}, <id>, :id, $THREAD, …, *.
const PLACEHOLDER = /\{[^}]+\}|<[^>]+>|:\w+|\$\{?\w+\}?|…|\.\.\.|\*/g;
const hasPlaceholder = (segment: string) => segment.split(PLACEHOLDER).length > 1;

function segmentMatches(served: string, documented: string): boolean {
  if (served.startsWith(':') || served === documented) return true;
  if (!hasPlaceholder(documented)) return false;
  const pattern = documented.split(PLACEHOLDER).map((part) => part.replace(/[.+^${}()|[\]\\?*]/g, '\\$&')).join('.+');
  return new RegExp(`^${pattern}$`).test(served);
}

// Whether a served route (`:param`, `*`) answers a documented path; `prefix`: or any path below it.
function routeMatches(served: string, documented: string, prefix = false): boolean {
  const s = served.split('/').filter(Boolean);
  const d = documented.split('/').filter(Boolean);
  for (let i = 0; i < d.length; i++) {
    if (s[i] === '*') return true;
    if (i >= s.length || !segmentMatches(s[i]!, d[i]!)) return false;
  }
  return prefix ? s.length >= d.length : s.length === d.length;
}

export async function routeServed(vocabulary: Vocabulary, method: string | undefined, path: string): Promise<boolean> {
  const clean = path.replace(/[?#].*$/, '').replace(/\/$/, '') || '/';
  const methodMatches = (r: { method: string }) => !method || r.method === method || r.method === 'ALL' || (method === 'HEAD' && r.method === 'GET');
  if (vocabulary.routes.some((r) => routeMatches(r.path, clean) && methodMatches(r))) return true;
  // A family of routes named by what they share (`/dashboard/api`, `/oauth/…`).
  if (!method && vocabulary.routes.some((r) => routeMatches(r.path, clean, true))) return true;
  return vocabulary.probe(method ?? 'GET', clean.replace(PLACEHOLDER, 'x'));
}

// The CLI's commands as its help lists them: each line's words before its first argument or flag,
// and the flags the line names.
function cliCommands(help: string): { words: string[]; flags: Set<string> }[] {
  return help
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => /^[a-z]/.test(line))
    .map((line) => {
      const words: string[] = [];
      for (const word of line.split(/\s+/)) {
        if (!/^[a-z][a-z-]*$/.test(word)) break;
        words.push(word);
      }
      return { words, flags: new Set(line.match(/--[a-z][a-z-]*/g) ?? []) };
    });
}

// An `ams …` command line: its command words must be one the help lists (or the start of one),
// and each flag one that command takes.
export function cliProblem(help: string, line: string): string | null {
  const words = line.trim().split(/\s+/).slice(1);
  const command: string[] = [];
  for (const word of words) {
    if (!/^[a-z][a-z-]*$/.test(word)) break;
    command.push(word);
  }
  const flags = words.filter((w) => /^--[a-z]/.test(w)).map((w) => w.replace(/=.*$/, ''));
  if (command.length === 0) return flags.length === 0 || flags.every((f) => f === '--help') ? null : `\`${line}\`: no command`;
  const known = cliCommands(help).filter((c) => command.every((w, i) => c.words[i] === undefined || c.words[i] === w) && c.words.length > 0);
  // Arguments may follow the command words (`ams agents create alice`): the command is the longest
  // help line whose words all match.
  const exact = known.filter((c) => c.words.every((w, i) => command[i] === w));
  if (exact.length === 0) {
    if (known.some((c) => command.every((w, i) => c.words[i] === w))) return null;
    // Name the words up to the first that no command has there.
    let n = 0;
    while (cliCommands(help).some((c) => command.slice(0, n + 1).every((w, i) => c.words[i] === w))) n++;
    return `\`${line}\`: the CLI has no command \`ams ${command.slice(0, n + 1).join(' ')}\` (see \`ams help\`)`;
  }
  const taken = new Set(exact.flatMap((c) => [...c.flags]));
  const unknown = flags.filter((f) => !taken.has(f) && f !== '--help');
  return unknown.length === 0 ? null : `\`${line}\`: \`ams ${exact[0]!.words.join(' ')}\` takes no ${unknown.join(', ')}`;
}

// Every drift in one document: a name that the code does not have.
export async function driftIn(doc: Doc, v: Vocabulary): Promise<Finding[]> {
  const found: Finding[] = [];
  const at = (line: number, message: string) => found.push(`${doc.path}:${line}: ${message}`);

  for (const span of inlineCode(doc.text)) {
    const route = ROUTE_SPAN.exec(span.text);
    if (route) {
      const [, method, path] = route;
      if (!(await routeServed(v, method, path!))) at(span.line, `\`${span.text}\`: no such route`);
      else if (path!.startsWith('/api/') && !v.apiPaths.some((p) => routeMatches(p.replace(/\{(\w+)\}/g, ':$1'), path!.replace(/[?#].*$/, '')))) {
        at(span.line, `\`${span.text}\`: served, but not in the OpenAPI document`);
      }
      continue;
    }
    const env = ENV_SPAN.exec(span.text);
    if (env) {
      const name = env[1]!;
      if (!v.configKeys.includes(name) && !v.codeWords.has(name)) at(span.line, `\`${name}\`: no such configuration variable, and nothing reads it`);
      continue;
    }
    const identifier = IDENTIFIER_SPAN.exec(span.text);
    if (identifier) {
      // A tool, log event, metric or column of ours; PostgreSQL's and other programs' own names
      // (settings, functions, fields) are not ours to check.
      const name = identifier[1]!;
      if (!v.tools.includes(name) && !v.codeWords.has(name) && !foreignName(name, doc.text.split('\n')[span.line - 1]!)) at(span.line, `\`${span.text}\`: named nowhere in the code`);
      continue;
    }
    if (/^ams(\s|$)/.test(span.text)) {
      const problem = cliProblem(v.cliHelp, span.text);
      if (problem) at(span.line, problem);
      continue;
    }
    const script = /^bun run (?:--silent )?([\w:-]+)/.exec(span.text);
    if (script) {
      if (!v.scripts.includes(script[1]!)) at(span.line, `\`${span.text}\`: package.json has no script ${script[1]}`);
      continue;
    }
    const path = TREE_PREFIX.exec(span.text)?.[1];
    // `sql/NNN_words.sql` stands for any migration; `sql/008` names one by its number.
    const pattern = path?.replace(/N{3,}(_words)?/g, '*');
    // Modules are often named from src/ (`domain/deliveries/inbox.ts`).
    const inTree = (p: string) => existsInTree(p) || existsInTree(`src/${p}`);
    if (pattern && !inTree(pattern) && !inTree(`${pattern}_*`) && !v.ignored(pattern)) at(span.line, `\`${span.text}\`: no such file or folder`);
  }

  for (const block of fencedBlocks(doc.text)) {
    if (!['sh', 'bash', 'shell', 'console'].includes(block.lang)) continue;
    for (const [i, raw] of block.body.split('\n').entries()) {
      const line = raw.replace(/^\$\s+/, '');
      if (/^ams\s/.test(line)) {
        const problem = cliProblem(v.cliHelp, line.replace(/\s+#.*$/, '').replace(/\s*[|&;>].*$/, ''));
        if (problem) at(block.line + 1 + i, problem);
      }
      for (const m of line.matchAll(/\bbun run (?:--silent )?([\w:-]+)/g)) {
        if (!v.scripts.includes(m[1]!)) at(block.line + 1 + i, `\`bun run ${m[1]}\`: package.json has no such script`);
      }
      for (const m of line.matchAll(new RegExp(`(?:-X\\s+(${METHODS})\\s+)?(?:"|')?\\$\\{?AMS\\}?(\\/[^\\s"'|)]*)`, 'g'))) {
        if (!(await routeServed(v, m[1], m[2]!))) at(block.line + 1 + i, `\`${m[2]}\`: no such route`);
      }
    }
  }

  for (const link of links(doc.text)) {
    const target = linkTarget(doc.path, link.text);
    if (!target) continue;
    if (!existsInTree(target.path)) {
      at(link.line, `link to ${link.text}: no such file`);
      continue;
    }
    if (target.anchor && target.path.endsWith('.md')) {
      const text = readFileSync(join(ROOT, target.path), 'utf8');
      if (!anchors(text).has(target.anchor)) at(link.line, `link to ${link.text}: no such heading in ${target.path}`);
    }
  }
  return found;
}
