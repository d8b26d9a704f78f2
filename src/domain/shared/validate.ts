import { Kind, TypeRegistry, type TSchema, type Static } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors';
import { invalid } from './errors';

// Lengths are counted in code points (Unicode characters), as JSON Schema's minLength and maxLength
// count them, so that the published schemas and every validator generated from them agree with the
// service. JavaScript's `length` counts UTF-16 code units, two for most emoji.
export function codePoints(text: string): number {
  let count = 0;
  for (const _ of text) count++;
  return count;
}

// The field a sentence names: `thread.title` for the path /thread/title, `root` for the whole value.
const fieldOf = (error: ValueError, root: string) => (error.path ? error.path.slice(1).replaceAll('/', '.') : root);

// One sentence per broken rule, naming the field and the bound, e.g.
// "content must be at most 10000 characters". Every door shows these same sentences.
export function describeValueError(error: ValueError, root = 'body'): string {
  const field = fieldOf(error, root);
  const s = error.schema as Record<string, unknown>;
  // A missing field fails its type check too; say what is actually wrong.
  if (error.value === undefined && error.path) return `${field} is required`;
  switch (error.type) {
    case ValueErrorType.ObjectRequiredProperty:
      return `${field} is required`;
    case ValueErrorType.Kind:
      return (error.schema as TSchema)[Kind] === COUNTED ? describeCountedString(error, root) : `${field} is invalid: ${error.message}`;
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

// A string schema with length bounds, as validate() checks it: the bounds in code points, and its
// other rules (type, pattern) as TypeBox checks them, in TypeBox's order.
const COUNTED = 'CodePointString';
type Counted = TSchema & { minLength?: number; maxLength?: number; others: TypeCheck<TSchema> };

function lengthSentence(schema: Counted, text: string, field: string): string | null {
  const length = codePoints(text);
  if (schema.minLength !== undefined && length < schema.minLength) {
    return schema.minLength === 1 ? `${field} must not be empty` : `${field} must be at least ${schema.minLength} characters`;
  }
  if (schema.maxLength !== undefined && length > schema.maxLength) return `${field} must be at most ${schema.maxLength} characters`;
  return null;
}

TypeRegistry.Set<Counted>(
  COUNTED,
  (schema, value) => typeof value === 'string' && lengthSentence(schema, value, '') === null && schema.others.Check(value),
);

function describeCountedString(error: ValueError, root: string): string {
  const schema = error.schema as Counted;
  const field = fieldOf(error, root);
  const tooShortOrLong = typeof error.value === 'string' ? lengthSentence(schema, error.value, field) : null;
  if (tooShortOrLong) return tooShortOrLong;
  const other = schema.others.Errors(error.value).First();
  return other ? describeValueError({ ...other, path: error.path }, root) : `${field} is invalid`;
}

// The schema as validate() checks it: a copy in which every string with a length bound is counted.
// The schema itself keeps plain minLength and maxLength, which the published JSON Schema reads.
function countingCodePoints(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(countingCodePoints);
  if (schema === null || typeof schema !== 'object') return schema;
  const s = schema as Record<PropertyKey, unknown>;
  if (s[Kind] === 'String' && (s.minLength !== undefined || s.maxLength !== undefined)) {
    const { minLength: _min, maxLength: _max, ...others } = s;
    return { ...s, [Kind]: COUNTED, others: TypeCompiler.Compile(others as unknown as TSchema) };
  }
  const copy: Record<PropertyKey, unknown> = {};
  for (const key of Reflect.ownKeys(s)) copy[key] = countingCodePoints(s[key]);
  return copy;
}

const compiled = new WeakMap<TSchema, TypeCheck<TSchema>>();

// Checks input against a schema and returns it typed, or throws the first broken rule as a
// DomainError. Unknown fields are ignored so that clients can send more than we read.
export function validate<S extends TSchema>(schema: S, input: unknown, root = 'body'): Static<S> {
  const broken = findUnstorableText(input, root);
  if (broken) throw invalid(broken.sentence, broken.field);
  let check = compiled.get(schema);
  if (!check) {
    check = TypeCompiler.Compile(countingCodePoints(schema) as TSchema);
    compiled.set(schema, check);
  }
  if (check.Check(input)) return input as Static<S>;
  const first = check.Errors(input).First();
  throw invalid(first ? describeValueError(first, root) : `${root} is invalid`, first ? fieldOf(first, root) : root);
}

// Text the database would not keep as given. PostgreSQL cannot store the NUL character at all, and
// an unpaired UTF-16 surrogate (what JSON's "\ud800" parses into) has no UTF-8 form, so the driver
// would store U+FFFD in its place without a word. Either is refused with the name of its field.
function ruleBrokenBy(text: string): string | null {
  if (text.includes('\u0000')) return 'must not contain the NUL character (U+0000)';
  if (!text.isWellFormed()) return 'must not contain an unpaired surrogate (U+D800 to U+DFFF), which is not valid Unicode';
  return null;
}

// For a single string the domain reads outside a schema.
export function checkStorableText(text: string, field: string): void {
  const broken = ruleBrokenBy(text);
  if (broken) throw invalid(`${field} ${broken}`, field);
}

// The first string in the input that breaks a rule above, as its field and the sentence, or null. A
// field is named as describeValueError names it: by its path inside the input, or as root if it is
// the input.
function findUnstorableText(value: unknown, root: string, path = '', depth = 0): { field: string; sentence: string } | null {
  if (typeof value === 'string') {
    const broken = ruleBrokenBy(value);
    return broken ? { field: path || root, sentence: `${path || root} ${broken}` } : null;
  }
  if (depth > 32 || value === null || typeof value !== 'object') return null;
  for (const [key, item] of Object.entries(value)) {
    const found = findUnstorableText(item, root, path ? `${path}.${key}` : key, depth + 1);
    if (found) return found;
  }
  return null;
}
