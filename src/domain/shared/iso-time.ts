// A time as every answer writes it (ISO 8601 in UTC, to the millisecond): from a timestamptz
// column, which postgres.js reads as a Date, or from a time inside a json column, which arrives as
// PostgreSQL's text. Null stays null.
export function iso(value: Date | string): string;
export function iso(value: Date | string | null): string | null;
export function iso(value: Date | string | null): string | null {
  return value === null ? null : new Date(value).toISOString();
}
