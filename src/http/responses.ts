import { Type as T, type TSchema } from '@sinclair/typebox';
import { DATABASE_UNAVAILABLE } from '../db/unavailable';
import { EXAMPLE_REQUEST_ID, internalError } from '../web/envelope';
import { GOVERNANCE_CODES, type GovernanceCode } from '../domain/shared/errors';
import { expiredKey, UNKNOWN_KEY } from '../domain/agents/authentication';

// The time the document's example of an expired key names; test/openapi-contract.test.ts gives a
// key this expiry to have the service say it.
export const EXAMPLE_KEY_EXPIRY = new Date('2026-01-01T00:00:00.000Z');

// The agent API's responses as the OpenAPI document describes them: the envelope's schemas, and
// the failures each route can answer with example sentences.
export const Success = <S extends TSchema>(data: S) =>
  T.Object({ success: T.Literal(true), data }, { description: 'Success envelope' });

export const Failure = T.Object(
  {
    success: T.Literal(false),
    error: T.String({ description: 'A sentence for people; branch on the status code, never on this text.' }),
    code: T.Optional(
      T.Union(GOVERNANCE_CODES.map((c) => T.Literal(c)), {
        description:
          'Present on a refusal people configured, for programs to branch on: `contact_policy` (403: the agent named accepts threads only from its contacts, or only from people), `blocked` (403: it has you on its block list), `quota_exceeded` (429: your send quota; wait Retry-After seconds). More codes may be added; treat an unknown one as its status alone.',
      }),
    ),
  },
  { title: 'Error', description: 'Failure envelope: every refusal and fault, whatever its status.' },
);

// Example sentences of one failure status, by name: the document shows each one under that status,
// and test/openapi-contract.test.ts checks that the service really answers it there. A refusal
// people configured is shown with its code.
export type CodedExample = { sentence: string; code: GovernanceCode };
export type Examples = Record<string, string | CodedExample>;
export const EXAMPLES = 'x-examples';

const meaning = {
  400: 'The request is invalid; the sentence names the field and the rule. Nothing was changed.',
  401: 'The agent key is missing, malformed, unknown, revoked or expired, or its agent is archived.',
  403: 'The caller may not do this; with `code`, a rule people set refused it (a contact policy or block list).',
  404: 'No such record, or it is not visible to the caller.',
  409: 'What the request asks conflicts with what is stored (the sentence says what, and what to do first). Nothing was changed.',
  410: 'What the request names existed and is no longer kept.',
  413: 'The request body is larger than the configured limit (BODY_LIMIT_BYTES; for an upload, FILE_MAX_BYTES), or an upload would pass its uploader\'s storage quota (FILE_QUOTA_BYTES). Nothing was kept or changed.',
  429: 'The caller already has as many of these under way or open as it may (wait for one to end, then retry), or its send quota is used up (code quota_exceeded; retry after the seconds Retry-After gives).',
  500: 'An unexpected fault, logged by the service. Nothing about the request will fix it.',
  503: 'The database is unavailable or busy for a moment, or the request ran past the time the service allows one statement (STATEMENT_TIMEOUT_MS); retry with backoff. Nothing was changed.',
} as const;
type FailureStatus = keyof typeof meaning;

const answer = (status: FailureStatus, examples: Examples) =>
  T.Object(Failure.properties, { title: 'Error', description: meaning[status], [EXAMPLES]: examples });

// What any agent route can answer besides its own refusals.
const everyRoute = {
  400: { nulInUrl: 'The request URL must not contain the NUL character (%00).' },
  401: {
    missingKey: 'Authorization header is missing; send "Authorization: Bearer agt_…".',
    malformedHeader: 'Authorization header is malformed; expected "Bearer agt_…".',
    malformedKey: 'The API key is malformed: an agent key is agt_ and 43 more letters, digits, - or _; check that it was copied whole.',
    unknownKey: UNKNOWN_KEY,
    expiredKey: expiredKey(EXAMPLE_KEY_EXPIRY),
  },
  500: { internal: internalError(EXAMPLE_REQUEST_ID) },
  503: { databaseUnavailable: DATABASE_UNAVAILABLE },
};
const everyPost = {
  400: { malformedBody: 'The request body is not valid JSON.' },
  413: { bodyTooLarge: 'The request body is larger than the limit of 1048576 bytes.' },
};

// Response schemas for a route, its success shape and every failure it can answer: its own (with
// example sentences) and those every route or every POST can answer. Elysia checks the success
// shape at run time; the document publishes them all.
// `held`: the route may also answer 202 with the same shape, when what was sent waits for a person.
export function responses<S extends TSchema>(
  // 'upload': a POST whose body is a file's bytes, never JSON.
  method: 'get' | 'post' | 'put' | 'delete' | 'upload',
  status: 200 | 201,
  data: S,
  own: Partial<Record<400 | 403 | 404 | 409 | 410 | 413 | 429 | 503, Examples>> = {},
  held?: string,
) {
  const post = method === 'get' ? { 400: {}, 413: undefined } : method === 'upload' ? { 400: {}, 413: everyPost[413] } : everyPost;
  const failures: Partial<Record<FailureStatus, Examples>> = {
    400: { ...own[400], ...post[400], ...everyRoute[400] },
    401: everyRoute[401],
    403: own[403],
    404: own[404],
    409: own[409],
    410: own[410],
    413: own[413] ?? post[413],
    429: own[429],
    500: everyRoute[500],
    503: { ...own[503], ...everyRoute[503] },
  };
  const out: Record<number, TSchema> = { [status]: Success(data) };
  if (held) out[202] = T.Object(Success(data).properties, { description: held });
  for (const [code, examples] of Object.entries(failures)) {
    if (examples) out[Number(code)] = answer(Number(code) as FailureStatus, examples);
  }
  return out;
}

// Bodies are validated by the domain (the same sentences for every door), so routes describe
// theirs to the OpenAPI document here instead of handing Elysia a second validator.
export const jsonBody = (schema: TSchema) => ({
  requestBody: { required: true, content: { 'application/json': { schema } } },
});
