// JSON lines between the bench's processes: the far ends (waiters.ts, streams.ts) write them in
// batches, the load process reads them.

// Lines are written out together every 50 ms: a write per line would compete for the CPU with the
// very answers being timed.
export function batchedLines() {
  let pending = '';
  const flush = () => {
    process.stdout.write(pending);
    pending = '';
  };
  const out = (line: unknown) => {
    if (pending === '') setTimeout(flush, 50);
    pending += `${JSON.stringify(line)}\n`;
  };
  return { out, flush };
}

// Every JSON line a child process writes, in order, until it ends.
export async function eachLine(stream: ReadableStream<Uint8Array>, onLine: (line: any) => void) {
  let pending = '';
  for await (const chunk of stream) {
    pending += new TextDecoder().decode(chunk);
    const lines = pending.split('\n');
    pending = lines.pop()!;
    for (const line of lines) onLine(JSON.parse(line));
  }
}
