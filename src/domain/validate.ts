import type { TSchema, Static } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors';
import { invalid } from './errors';

// One sentence per broken rule, naming the field and the bound, e.g.
// "content must be at most 10000 characters". Every door shows these same sentences.
export function describeValueError(error: ValueError, root = 'body'): string {
  const field = error.path ? error.path.slice(1).replaceAll('/', '.') : root;
  const s = error.schema as Record<string, unknown>;
  // A missing field fails its type check too; say what is actually wrong.
  if (error.value === undefined && error.path) return `${field} is required`;
  switch (error.type) {
    case ValueErrorType.ObjectRequiredProperty:
      return `${field} is required`;
    case ValueErrorType.StringMaxLength:
      return `${field} must be at most ${s.maxLength} characters`;
    case ValueErrorType.StringMinLength:
      return s.minLength === 1 ? `${field} must not be empty` : `${field} must be at least ${s.minLength} characters`;
    case ValueErrorType.StringPattern:
      return `${field} ${(s.description as string | undefined) ?? `must match ${s.pattern}`}`;
    case ValueErrorType.String:
      return `${field} must be a string`;
    case ValueErrorType.Array:
      return `${field} must be an array`;
    case ValueErrorType.ArrayMaxItems:
      return `${field} must have at most ${s.maxItems} items`;
    case ValueErrorType.Object:
      return field === root ? `${root} must be a JSON object` : `${field} must be an object`;
    case ValueErrorType.Integer:
    case ValueErrorType.Number:
      return `${field} must be a number`;
    case ValueErrorType.NumberMinimum:
    case ValueErrorType.IntegerMinimum:
      return `${field} must be at least ${s.minimum}`;
    case ValueErrorType.NumberMaximum:
    case ValueErrorType.IntegerMaximum:
      return `${field} must be at most ${s.maximum}`;
    case ValueErrorType.Boolean:
      return `${field} must be true or false`;
    default:
      return `${field} is invalid: ${error.message}`;
  }
}

const compiled = new WeakMap<TSchema, TypeCheck<TSchema>>();

// Checks input against a schema and returns it typed, or throws the first broken rule as a
// DomainError. Unknown fields are ignored so that clients can send more than we read.
export function validate<S extends TSchema>(schema: S, input: unknown, root = 'body'): Static<S> {
  const nul = pathToNul(input, root);
  if (nul) throw invalid(`${nul} must not contain the NUL character (U+0000)`);
  let check = compiled.get(schema);
  if (!check) {
    check = TypeCompiler.Compile(schema);
    compiled.set(schema, check);
  }
  if (check.Check(input)) return input as Static<S>;
  const first = check.Errors(input).First();
  throw invalid(first ? describeValueError(first, root) : `${root} is invalid`);
}

// PostgreSQL cannot store the NUL character in text, so a string holding one is refused here with
// the name of its field, instead of failing in the database. Returns that field, or null.
function pathToNul(value: unknown, path: string, depth = 0): string | null {
  if (typeof value === 'string') return value.includes('\u0000') ? path : null;
  if (depth > 32 || value === null || typeof value !== 'object') return null;
  for (const [key, item] of Object.entries(value)) {
    const found = pathToNul(item, path === 'body' ? key : `${path}.${key}`, depth + 1);
    if (found) return found;
  }
  return null;
}
