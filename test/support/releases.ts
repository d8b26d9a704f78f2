import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

export const ROOT = resolve(import.meta.dir, '../..');

export type Release = { version: string; date: string; commit: string };

// The releases CHANGELOG.md lists, newest first, each with the commit it was cut from (a tag does
// not travel with every clone; the commit does).
export function releases(): Release[] {
  const text = readFileSync(resolve(ROOT, 'CHANGELOG.md'), 'utf8');
  return [...text.matchAll(/^## (\d+\.\d+\.\d+) — (\d{4}-\d{2}-\d{2}) \(([0-9a-f]{40})\)$/gm)].map((m) => ({
    version: m[1]!,
    date: m[2]!,
    commit: m[3]!,
  }));
}

export function git(args: string[]): string {
  const out = Bun.spawnSync(['git', ...args], { cwd: ROOT, stdout: 'pipe', stderr: 'pipe' });
  if (out.exitCode !== 0) throw new Error(`git ${args.join(' ')} failed: ${out.stderr.toString().trim()}`);
  return out.stdout.toString();
}

// The release the next one must stay compatible with. Its commit must be in this clone's history:
// a shallow clone fails here with what to do, rather than test nothing.
export function previousRelease(): Release {
  const newest = releases()[0];
  if (!newest) throw new Error('CHANGELOG.md lists no release ("## x.y.z — YYYY-MM-DD (<commit>)").');
  const present = Bun.spawnSync(['git', 'cat-file', '-e', `${newest.commit}^{commit}`], { cwd: ROOT });
  if (present.exitCode !== 0) {
    throw new Error(`Release ${newest.version} (${newest.commit}) is not in this clone's history; the upgrade checks need it (git fetch --unshallow).`);
  }
  return newest;
}
