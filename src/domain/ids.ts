// Ids are opaque to clients but are UUIDs to us; anything else cannot name a record, so it is
// answered like a record the caller cannot see instead of reaching the database as a cast error.
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isId = (value: unknown): value is string => typeof value === 'string' && UUID.test(value);
