// The bounds the service holds input and lists to. A leaf module (it imports nothing), so that the
// dashboard's browser code reads the same figures as the server (src/dashboard/web).

export const LIMITS = {
  title: 200,
  goal: 2000,
  content: 10_000,
  summary: 200,
  summaryRequiredAbove: 200,
  webhookSummary: 120,
  listDefault: 50,
  listCap: 200,
  participantsPerRequest: 100,
  // The most FILES_PER_MESSAGE may be set to: what the schema of a post allows at all.
  filesPerMessageCap: 100,
  // A file's bytes handed over inside a protocol message rather than by address (MCP's
  // resources/read blob, A2A's raw parts), at most: base64 makes them a third larger.
  inlineFileBytes: 256 * 1024,
  // A file an A2A answer about one task hands over as its bytes (a raw part) rather than only by
  // address, at most: its two messages carry at most 2 × FILES_PER_MESSAGE files, so an answer
  // holds at most 1.25 MiB of them by default. No more than a stored chunk (files/file-store.ts).
  answerFileBytes: 64 * 1024,
  inboxWaitSeconds: 60,
  // MCP clients give up on a request after 60 s by default (the official SDKs do), so a tool waits
  // at most this long, leaving room for the answer.
  toolInboxWaitSeconds: 50,
  // What one tool result may hold of message text (contents and summaries, in characters): hosts
  // cap what a tool may hand the model, typically near 25 000 tokens.
  toolResultCharacters: 60_000,
} as const;

// The dashboard's lists: a page holds `size` entries, and a live page reads again at most `window`
// of them (keyset.ts).
export const PAGE = { size: 50, window: 500 } as const;

// List limits never error: a missing or unparseable value means the default, and anything above
// the cap means the cap (the contract's rule for every list endpoint and tool).
export function listLimit(raw: unknown): number {
  const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\s*\d+\s*$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(n) || n < 1) return LIMITS.listDefault;
  return Math.min(n, LIMITS.listCap);
}
