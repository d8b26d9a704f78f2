// Ids are opaque to clients but are UUIDs to us; anything else cannot name a record, so it is
// answered like a record the caller cannot see instead of reaching the database as a cast error.
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isId = (value: unknown): value is string => typeof value === 'string' && UUID.test(value);

// The smallest version 7 UUID of the given millisecond. Ids sort by the time they were written, so
// a time range becomes a range of the primary key.
export function firstIdAt(ms: number): string {
  const hex = Math.max(0, Math.floor(ms)).toString(16).padStart(12, '0');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-0000-0000-000000000000`;
}
