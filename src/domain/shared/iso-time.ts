// A time as every answer writes it (ISO 8601 in UTC, to the millisecond): from a timestamptz
// column, which postgres.js reads as a Date, or from a time inside a json column, which arrives as
// PostgreSQL's text. Null stays null.
export function iso(value: Date | string): string;
export function iso(value: Date | string | null): string | null;
export function iso(value: Date | string | null): string | null {
  return value === null ? null : new Date(value).toISOString();
}

// The same from a timestamptz PostgreSQL wrote as text (`created_at::text`), for a read that
// writes many: in UTC (`2026-11-29 15:55:14.123456+00`, the form of a UTC session with the default
// DateStyle) the text is rearranged, a fifth of the cost of parsing it into a Date and writing that
// out; any other form (another time zone or DateStyle, a year past 9999) is parsed as before.
// Both cut the microseconds off rather than rounding them.
export function isoFromText(text: string): string {
  const n = text.length;
  if (n >= 22 && n <= 29 && text.charCodeAt(10) === 32 && text.endsWith('+00')) {
    const time = `${text.slice(0, 10)}T${text.slice(11, 19)}`;
    if (n === 22) return `${time}.000Z`;
    if (text.charCodeAt(19) === 46) return `${time}.${`${text.slice(20, n - 3)}00`.slice(0, 3)}Z`;
  }
  return new Date(text).toISOString();
}
