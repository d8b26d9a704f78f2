// The line shown for a message where no body may go: the sender's summary, else the body's
// first line, cut to `max` characters.
export function oneLine(summary: string | null, content: string, max: number): string {
  const text = (summary ?? content).split(/\r?\n/).find((l) => l.trim() !== '') ?? '';
  return shortened(text, max);
}

// Text on one line (whitespace runs become one space), cut to `max` characters with an ellipsis.
// Counted in code points, so that a cut never splits an emoji into a lone surrogate (which would
// read differently once stored as UTF-8 than when sent straight away).
export function shortened(text: string, max: number): string {
  const chars = Array.from(text.trim().replace(/\s+/g, ' '));
  return chars.length <= max ? chars.join('') : `${chars.slice(0, max - 1).join('')}…`;
}
