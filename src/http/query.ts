import { Kind, Type as T, TypeRegistry } from '@sinclair/typebox';
import { LIMITS } from '../domain/shared/schemas';

// Query values the domain reads itself, by the contract's own rules: a bad `limit` falls back to the
// default rather than failing, and a bad `wait` gets the domain's sentence. Elysia passes them on
// untouched while the document still says what a well-behaved client sends: an integer, a number.
const READ_BY_THE_DOMAIN = 'ReadByTheDomain';
TypeRegistry.Set(READ_BY_THE_DOMAIN, () => true);

export const documentedAs = (schema: Record<string, unknown>) => T.Unsafe<string | undefined>({ [Kind]: READ_BY_THE_DOMAIN, ...schema });

// A bounded wait in seconds, read by the domain's waitSeconds().
const waitParameter = (description: string) =>
  T.Optional(documentedAs({ type: 'number', minimum: 0, maximum: LIMITS.inboxWaitSeconds, default: 0, description, examples: [30] }));

export const LimitQuery = T.Object({
  limit: T.Optional(
    documentedAs({
      type: 'integer',
      minimum: 1,
      default: LIMITS.listDefault,
      description: `How many entries to return, default ${LIMITS.listDefault}, cap ${LIMITS.listCap}. A missing or unparseable value means the default; a larger one means the cap.`,
      examples: [LIMITS.listDefault],
    }),
  ),
});

export const InboxQuery = T.Object({
  ...LimitQuery.properties,
  after: T.Optional(
    documentedAs({
      type: 'string',
      description: 'A deliveryId: only entries accepted after it are listed (and waited for). Not a delivery id: refused (400).',
      examples: ['01a1ff80-d963-77fb-8efa-675ab5c7dfaa'],
    }),
  ),
  wait: waitParameter(
    `Seconds to hold the request while the inbox is empty, from 0 to ${LIMITS.inboxWaitSeconds}. It answers as soon as a message arrives, or with [] when the wait ends. Any other value is refused (400).`,
  ),
});

export const ThreadListQuery = T.Object({
  limit: T.Optional(
    documentedAs({
      type: 'integer',
      minimum: 1,
      description: `How many threads to return, at most ${LIMITS.listCap}; an unparseable value means ${LIMITS.listDefault}. Without limit or after, every thread is returned, which is to change: see the description.`,
      examples: [LIMITS.listDefault],
    }),
  ),
  after: T.Optional(
    documentedAs({
      type: 'string',
      description: 'A threadId from the previous page: only threads opened before it are listed. Not a thread id: refused (400).',
      examples: ['01a1ff80-d963-77fb-8efa-675ab5c7dfaa'],
    }),
  ),
});

// An optional Idempotency-Key header: checked by the domain (checkIdempotencyKey), for its sentence.
export const IdempotencyHeaders = T.Object({
  'idempotency-key': T.Optional(
    documentedAs({
      type: 'string',
      minLength: 1,
      maxLength: 255,
      pattern: '^[\\x21-\\x7e]+$',
      description:
        'Makes the request safe to retry: a repeat with the same key by the same agent within the retention (24 h by default) answers the first answer and creates nothing. The same key with a different request is refused (400). Printable ASCII without spaces, such as a UUID.',
      examples: ['9f1c2d7e-4b3a-4e55-9a61-0c2b8f7d3e10'],
    }),
  ),
});

export const ReceiptsQuery = T.Object({
  waitFor: T.Optional(
    documentedAs({
      type: 'string',
      enum: ['delivered', 'fetched'],
      description: 'Hold the request until every recipient has reached this step (or failed). Any other value is refused (400).',
    }),
  ),
  wait: waitParameter(`With waitFor: seconds to hold the request, from 0 to ${LIMITS.inboxWaitSeconds}. Any other value is refused (400).`),
});

export const SearchQuery = T.Object({
  q: documentedAs({
    type: 'string',
    minLength: 1,
    maxLength: 200,
    description: 'What to look for, in websearch syntax: words (all must appear), "a phrase", -excluded, or. Required; at most 200 characters.',
    examples: ['invoice format -draft'],
  }),
  threadId: T.Optional(documentedAs({ type: 'string', description: 'Search one thread only; 404 when the caller cannot see it.' })),
  limit: LimitQuery.properties.limit,
  after: T.Optional(documentedAs({ type: 'string', description: 'The `next` of the previous page, to read the one after it.' })),
});

export const DirectoryQuery = T.Object({
  q: T.Optional(
    documentedAs({
      type: 'string',
      maxLength: 200,
      description: 'Words to look for in usernames, display names, tags and descriptions, in websearch syntax: words (all must appear), "a phrase", -excluded, or. Optional.',
      examples: ['sql review'],
    }),
  ),
  tag: T.Optional(documentedAs({ type: 'string', maxLength: 200, description: 'Only agents with this tag (exact, case aside). Optional.', examples: ['sql'] })),
  limit: LimitQuery.properties.limit,
  after: T.Optional(documentedAs({ type: 'string', description: 'The `next` of the previous page (a username), to read the one after it.' })),
});
