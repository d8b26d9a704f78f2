import { invalid } from './errors';
import { checkStorableText, codePoints } from './validate';

// What a person types into a dashboard search box, as the lists read it.
export const SEARCH_MAX = 200;

// From a query value: trimmed, bounded and storable; empty means no search.
export function searchText(raw: unknown, name = 'q'): string | null {
  if (typeof raw !== 'string' || raw.trim() === '') return null;
  const text = raw.trim();
  checkStorableText(text, name);
  if (codePoints(text) > SEARCH_MAX) throw invalid(`${name} must be at most ${SEARCH_MAX} characters`);
  return text;
}

// An ILIKE pattern that finds the text anywhere, its own % and _ taken literally.
export const containing = (text: string) => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
