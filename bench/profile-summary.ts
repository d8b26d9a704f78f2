// Where the service's CPU went in a profile from `BENCH_PROFILE=1 bun run bench`:
//   bun bench/profile-summary.ts bench/profile/CPU.….cpuprofile   (ROWS=40 for longer tables)
// Counts samples rather than summing time deltas: Bun's profiles charge the idle time between two
// samples to the next one, so the time columns of its markdown profile overstate whatever runs
// after a wait (socket writes, above all). A sample is a moment the process was running.
import { argv } from 'node:process';

type Frame = { functionName: string; url: string; lineNumber: number };
type Node = { id: number; callFrame: Frame; children?: number[] };

const file = argv[2];
if (!file) throw new Error('usage: bun bench/profile-summary.ts <file.cpuprofile>');
const profile = (await Bun.file(file).json()) as { nodes: Node[]; samples: number[] };
const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
const parentOf = new Map<number, number>();
for (const n of profile.nodes) for (const child of n.children ?? []) parentOf.set(child, n.id);

// A frame's place: our code by file, a dependency by package, Bun's own by function name.
function placeOf(frame: Frame): string {
  const url = frame.url;
  if (!url || url === '[native code]') return `native: ${frame.functionName || '(anonymous)'}`;
  const dependency = url.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/);
  if (dependency) return dependency[1]!;
  const ours = url.match(/\/(src|bench)\/(.+)$/);
  if (ours) return `${ours[1]}/${ours[2]}`;
  return url.startsWith('node:') || url.startsWith('internal:') ? 'runtime (node: modules)' : url;
}

// Native frames are charged to the nearest JavaScript caller that is not the runtime's, so that a
// socket write made for postgres.js counts as postgres.js's.
function callerOf(id: number): string {
  for (let at: number | undefined = parentOf.get(id); at !== undefined; at = parentOf.get(at)) {
    const place = placeOf(nodes.get(at)!.callFrame);
    if (!place.startsWith('native') && place !== 'runtime (node: modules)') return place;
  }
  return '(no caller)';
}

const self = new Map<string, number>();
const byCaller = new Map<string, number>();
let running = 0;
for (const id of profile.samples) {
  const node = nodes.get(id)!;
  if (node.callFrame.functionName === '(idle)' || node.callFrame.functionName === '(program)') continue;
  running++;
  const place = placeOf(node.callFrame);
  self.set(place, (self.get(place) ?? 0) + 1);
  const charged = place.startsWith('native') || place === 'runtime (node: modules)' ? callerOf(id) : place;
  byCaller.set(charged, (byCaller.get(charged) ?? 0) + 1);
}

const table = (title: string, counts: Map<string, number>, rows = Number(process.env.ROWS ?? 15)) => {
  console.log(`\n| ${title} | samples | share |\n|---|---:|---:|`);
  for (const [place, n] of [...counts].sort((a, b) => b[1] - a[1]).slice(0, rows)) {
    console.log(`| ${place} | ${n} | ${((100 * n) / running).toFixed(1)} % |`);
  }
};
console.log(`${running} samples while running`);
table('Self, by place', self);
table('Charged to the JavaScript that asked (native work to its caller)', byCaller);
