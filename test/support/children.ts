import type { Subprocess } from 'bun';

// Server processes that tests start. Whatever a failed test left running is killed once the whole
// run is over (test/support/setup.ts): a hook in a helper module would attach to the first test
// file that imports it only, and Bun's test runner does not emit 'exit' for a handler to use.
const children = new Set<Subprocess>();

export function track<T extends Subprocess>(proc: T): T {
  children.add(proc);
  void proc.exited.then(() => children.delete(proc));
  return proc;
}

export function killChildren() {
  for (const proc of children) proc.kill('SIGKILL');
  children.clear();
}
