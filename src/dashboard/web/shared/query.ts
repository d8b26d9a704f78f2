// A query string of the values given, empty ones left out.
export function query(params: Record<string, string | null | undefined>): string {
  const q = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== '' && value !== null && value !== undefined) q.set(key, value);
  const text = q.toString();
  return text ? `?${text}` : '';
}
