import { LIMITS } from './schemas';

// List limits never error: a missing or unparseable value means the default, and anything above
// the cap means the cap (the contract's rule for every list endpoint and tool).
export function listLimit(raw: unknown): number {
  const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\s*\d+\s*$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(n) || n < 1) return LIMITS.listDefault;
  return Math.min(n, LIMITS.listCap);
}
