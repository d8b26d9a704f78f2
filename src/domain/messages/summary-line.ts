import { LIMITS } from '../shared/limits';

// The line shown for a message where no body may go: the sender's summary, else the body's
// first line, cut to `max` characters. Lines are found one at a time rather than by splitting the
// whole text: an inbox page computes fifty of them, and a "\r" before a "\n" is trimmed anyway.
export function oneLine(summary: string | null, content: string, max: number): string {
  const text = summary ?? content;
  for (let start = 0; ; ) {
    const end = text.indexOf('\n', start);
    const line = end === -1 ? text.slice(start) : text.slice(start, end);
    if (end === -1 || line.trim() !== '') return shortened(line, max);
    start = end + 1;
  }
}

// Text on one line (whitespace runs become one space), cut to `max` characters with an ellipsis.
// Counted in code points, so that a cut never splits an emoji into a lone surrogate (which would
// read differently once stored as UTF-8 than when sent straight away). A text no longer than `max`
// UTF-16 units has no more code points than that, and is returned without counting them.
export function shortened(text: string, max: number): string {
  const line = text.trim().replace(/\s+/g, ' ');
  if (line.length <= max) return line;
  const chars = Array.from(line);
  return chars.length <= max ? line : `${chars.slice(0, max - 1).join('')}…`;
}

// The summary an inbox entry shows: the sender's own as given, else the body's first line. Written
// into each delivery by the post (insertPosts), and made here again for a delivery older than that.
export const inboxSummary = (summary: string | null, content: string): string => summary ?? oneLine(null, content, LIMITS.summary);
