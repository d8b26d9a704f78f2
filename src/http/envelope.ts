import { Type as T, type TSchema } from '@sinclair/typebox';
import type { ErrorKind } from '../domain/errors';

// The one place that shapes responses: { success: true, data } or { success: false, error }.
export const ok = <D>(data: D) => ({ success: true as const, data });
export const fail = (error: string) => ({ success: false as const, error });

export const statusOf: Record<ErrorKind, number> = {
  invalid: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  rate_limited: 429,
};

export const Success = <S extends TSchema>(data: S) =>
  T.Object({ success: T.Literal(true), data }, { description: 'Success envelope' });

export const Failure = T.Object(
  {
    success: T.Literal(false),
    error: T.String({ description: 'A sentence for people; branch on the status code, never on this text.' }),
  },
  { description: 'Failure envelope', examples: [{ success: false, error: 'content must be at most 10000 characters' }] },
);

// Response schemas for a route: its success shape plus the failures it can answer with.
export function responses<S extends TSchema>(status: 200 | 201, data: S, failures: (400 | 401 | 403 | 404)[]) {
  const out: Record<number, TSchema> = { [status]: Success(data), 500: Failure };
  for (const code of failures) out[code] = Failure;
  return out;
}

// Bodies are validated by the domain (the same sentences for every door), so routes describe
// theirs to the OpenAPI document here instead of handing Elysia a second validator.
export const jsonBody = (schema: TSchema) => ({
  requestBody: { required: true, content: { 'application/json': { schema } } },
});
