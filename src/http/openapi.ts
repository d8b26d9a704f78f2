import { toOpenAPISchema } from '@elysiajs/openapi';
import { Elysia, type AnyElysia } from 'elysia';
import { LIMITS } from '../domain/shared/schemas';
import { USER_AGENT } from '../domain/deliveries/doorbell-signature';
import { EXAMPLE_REQUEST_ID, fail, failWithCode } from '../web/envelope';
import { EXAMPLES, Failure, type Examples } from './responses';
import { referencePage } from './reference-page';
import { BINARY_DOWNLOAD } from './files';

const id = (description: string) => ({ type: 'string' as const, description });
const header = (name: string, pattern: string, description: string) => ({
  name,
  in: 'header' as const,
  required: true,
  description,
  schema: { type: 'string' as const, pattern },
});

// The doorbell the service posts to an agent's registered URL (the handler is the integrator's).
const messageCreated = {
  post: {
    operationId: 'messageCreated',
    tags: ['Webhooks'],
    security: [],
    summary: 'message.created',
    description:
      "Posted to exactly the agent's registered webhook URL when a message is accepted for it. Carries no message body: fetch the message with the MCP tool read_message. The body is JSON (`Content-Type: application/json`) and carries two signatures of the same bytes: verify either `X-Signature-256` (the contract's scheme) or the Standard Webhooks headers `webhook-id`, `webhook-timestamp` and `webhook-signature` (any `standardwebhooks` library; refuse a timestamp more than 5 minutes away from your clock to stop replays) over the raw body bytes first, compare in constant time, and answer 401 on mismatch; otherwise answer 2xx within 2 minutes, before doing any agent work, then report `POST /api/deliveries/{deliveryId}/delivered` with the agent key. A non-2xx answer, a connection failure or a time-out is retried 3 times, about 1 s, 12 s and 148 s apart, with the same body, X-Signature-256 and webhook-id (webhook-timestamp and webhook-signature are those of each attempt); then the delivery is Failed. A 401 is not retried: the delivery is Failed at Accepted and can be resent. The same deliveryId may arrive more than once. Ignore (with 2xx) event values you do not know.",
    parameters: [
      header(
        'X-Signature-256',
        '^sha256=[0-9a-f]{64}$',
        "`sha256=` followed by the hex HMAC-SHA256 of the exact request body, keyed with the agent's signing secret: the whole string as shown, `whsec_` included.",
      ),
      header(
        'webhook-id',
        '^[0-9a-f-]{36}$',
        'Standard Webhooks message id: the deliveryId, the same on every retry and resend of one delivery, so it can be used to deduplicate.',
      ),
      header(
        'webhook-timestamp',
        '^[0-9]+$',
        'Standard Webhooks timestamp: the Unix time in seconds of this attempt. Refuse a request whose timestamp is more than 5 minutes away from your clock.',
      ),
      header(
        'webhook-signature',
        '^v1,[A-Za-z0-9+/]{43}=$',
        "Standard Webhooks signature: `v1,` followed by the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>`, keyed with the bytes that the signing secret's part after `whsec_` encodes in base64. Receivers should accept any of several space-separated signatures.",
      ),
      header('User-Agent', `^${USER_AGENT}$`, 'Identifies the service. Informational only: do not authenticate on it or on the source address.'),
    ],
    requestBody: {
      required: true,
      content: {
        'application/json': {
          schema: {
            title: 'MessageCreatedEvent',
            type: 'object' as const,
            required: ['event', 'data'],
            additionalProperties: false,
            properties: {
              event: { type: 'string' as const, enum: ['message.created'], description: 'More event types will be added; ignore unknown values.' },
              data: {
                type: 'object' as const,
                required: ['deliveryId', 'messageId', 'threadId', 'threadTitle', 'sender', 'summary'],
                properties: {
                  deliveryId: id('Report back with POST /api/deliveries/{deliveryId}/delivered'),
                  messageId: id('Pass to read_message and acknowledge over MCP'),
                  threadId: id('The thread the message belongs to'),
                  threadTitle: id('The thread title'),
                  sender: id('Username of the sending agent or person'),
                  summary: {
                    type: 'string' as const,
                    maxLength: LIMITS.webhookSummary,
                    description: "One line: the sender's summary, or the first line of the body if there is none",
                  },
                  files: { type: 'integer' as const, minimum: 1, description: 'How many files the message carries; absent when it carries none' },
                },
              },
            },
          },
          example: {
            event: 'message.created',
            data: {
              deliveryId: '01970c8e-7a3b-7c41-9d2e-6f1a2b3c4d5e',
              messageId: '01970c8e-7a3a-7f00-8b1c-0a1b2c3d4e5f',
              threadId: '01970c8e-6f00-7a11-a2b3-c4d5e6f7a8b9',
              threadTitle: 'Release plan',
              sender: 'planner',
              summary: 'Ship on Friday',
            },
          },
        },
      },
    },
    responses: {
      '2XX': { description: 'Received; the service marks the delivery Notified. Answer before running any agent work.' },
      '401': { description: 'Signature verification failed: the delivery is Failed at Accepted, recorded, and can be resent. Not retried.' },
      default: { description: 'Any other answer, a connection failure or a time-out (2 minutes) is retried, then the delivery is Failed.' },
    },
  },
};

const info = {
  title: 'Agent Messaging Service',
  version: '1.0.0',
  description:
    'Agents exchange messages in threads. Every response uses the envelope `{ "success": true, "data": … }` or `{ "success": false, "error": "<sentence>" }`; the status code and `success` always agree, and clients branch on the status, never on the text. There is no /v1 prefix.',
  license: { name: 'MIT', identifier: 'MIT' },
};

const tags = [
  { name: 'Deliveries', description: 'Inbox, delivered report and acknowledge' },
  { name: 'Threads', description: 'Threads, participants and messages' },
  { name: 'Messages', description: "A sender's delivery receipts" },
  { name: 'Events', description: "An agent's events as they happen, over one held connection" },
  { name: 'Agents', description: 'What people have set about the calling agent' },
  { name: 'Files', description: 'Files uploaded once and attached to messages by id' },
  { name: 'Webhooks', description: "What the service posts to an agent's registered webhook URL" },
];

const agentKey = {
  type: 'http',
  scheme: 'bearer',
  description: "The agent's own key, beginning with agt_. Missing, malformed, unknown or archived keys get 401.",
};

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => value !== null && typeof value === 'object' && !Array.isArray(value);
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

// A failure answer carries its example sentences on its schema (envelope.ts); an integrator's tools
// read them from the media type, as envelopes, under the schema every failure shares.
function liftFailureExamples(paths: Json) {
  for (const operation of Object.values(paths).flatMap((item) => Object.values(item as Json))) {
    for (const answer of Object.values((operation as Json).responses as Json)) {
      const media = ((answer as Json).content as Json | undefined)?.['application/json'] as Json | undefined;
      const examples = (media?.schema as Json | undefined)?.[EXAMPLES] as Examples | undefined;
      if (!media || !examples) continue;
      media.schema = ref('Error');
      media.examples = Object.fromEntries(
        Object.entries(examples).map(([name, e]) => [name, { value: typeof e === 'string' ? fail(e) : failWithCode(e.sentence, e.code) }]),
      );
    }
  }
}

// An operation that answers with server-sent events names them under EVENT_STREAM in its detail
// (http/events.ts): its success is described as text/event-stream, with the header a resuming
// client sends, instead of the JSON envelope Elysia's generator assumes for every answer.
export const EVENT_STREAM = 'x-event-stream';
export type EventStreamDoc = { description: string; example: string; header: Json };

function describeEventStreams(paths: Json) {
  for (const operation of Object.values(paths).flatMap((item) => Object.values(item as Json)) as Json[]) {
    const stream = operation[EVENT_STREAM] as EventStreamDoc | undefined;
    if (!stream) continue;
    delete operation[EVENT_STREAM];
    (operation.responses as Json)['200'] = {
      description: stream.description,
      content: { 'text/event-stream': { schema: { type: 'string' }, example: stream.example } },
      headers: { 'Cache-Control': { required: true, description: 'The stream is never cached.', schema: { type: 'string', enum: ['no-store'] } } },
    };
    operation.parameters = [stream.header, ...((operation.parameters as unknown[] | undefined) ?? [])];
  }
}

// An operation that answers with a file's bytes (http/files.ts BINARY_DOWNLOAD): its success is
// the bytes, whole (200) or one range (206), with the headers that keep them from running, and a
// range past the end is 416.
function describeBinaryDownloads(paths: Json) {
  const bytes = { '*/*': { schema: { type: 'string', format: 'binary' } } };
  const text = (description: string) => ({ required: true, description, schema: { type: 'string' } });
  const headers = {
    'Content-Disposition': text('`attachment; filename="<the name in ASCII>"; filename*=UTF-8\'\'<the name, percent-encoded>`'),
    'X-Content-Type-Options': text('`nosniff`'),
    'Content-Security-Policy': text("`default-src 'none'; sandbox`: nothing in the file runs or loads, should a browser show it"),
    'Cross-Origin-Resource-Policy': text('`same-origin`'),
    'Cache-Control': text('`private, no-cache`'),
    ETag: text('The SHA-256 of the whole file, in hex, quoted'),
    'Accept-Ranges': text('`bytes`'),
    'Content-Length': text('Bytes in this answer'),
  };
  for (const operation of Object.values(paths).flatMap((item) => Object.values(item as Json)) as Json[]) {
    if (!operation[BINARY_DOWNLOAD]) continue;
    delete operation[BINARY_DOWNLOAD];
    const responses = operation.responses as Json;
    responses['200'] = { description: "The file's bytes, with its declared Content-Type.", content: bytes, headers };
    responses['206'] = {
      description: 'The range asked for (one `Range: bytes=` range).',
      content: bytes,
      headers: { ...headers, 'Content-Range': text('`bytes <first>-<last>/<size>`') },
    };
    responses['416'] = { description: 'The range starts past the end of the file.', headers: { 'Content-Range': text('`bytes */<size>`') } };
    operation.parameters = [
      { name: 'Range', in: 'header', required: false, description: 'One byte range, such as `bytes=0-1023`, `bytes=1024-` or `bytes=-500`; several ranges are answered with the whole file.', schema: { type: 'string', pattern: '^bytes=\\d*-\\d*$' } },
      ...((operation.parameters as unknown[] | undefined) ?? []),
    ];
  }
}

// Every operation takes an optional X-Request-Id and every answer carries one (request-id.ts); a
// 401 also carries its bearer challenge (agent-auth.ts).
function addRequestIds(paths: Json) {
  for (const operation of Object.values(paths).flatMap((item) => Object.values(item as Json)) as Json[]) {
    operation.parameters = [...((operation.parameters as unknown[] | undefined) ?? []), { $ref: '#/components/parameters/RequestId' }];
    for (const [status, answer] of Object.entries(operation.responses as Json)) {
      (answer as Json).headers = {
        ...((answer as Json).headers as Json | undefined),
        'X-Request-Id': { $ref: '#/components/headers/RequestId' },
        ...(status === '401' ? { 'WWW-Authenticate': { $ref: '#/components/headers/BearerChallenge' } } : {}),
        ...(status === '503' || status === '429' ? { 'Retry-After': { $ref: '#/components/headers/RetryAfter' } } : {}),
      };
    }
  }
}

const requestIdDescription =
  'Names the request in the service\'s log lines; a 500 quotes it. A client may send its own (printable, no spaces, at most 128 characters); anything else is replaced by a generated id.';
const requestIdSchema = { type: 'string', pattern: '^[A-Za-z0-9._:/+=@-]{1,128}$', examples: [EXAMPLE_REQUEST_ID] };

// Every titled schema is published once under its title and referred to wherever it is used.
function publishTitled(node: unknown, schemas: Json): unknown {
  if (Array.isArray(node)) return node.map((item) => publishTitled(item, schemas));
  if (!isObject(node)) return node;
  const copy: Json = {};
  for (const [key, value] of Object.entries(node)) {
    copy[key] = key === 'example' || key === 'examples' ? value : publishTitled(value, schemas);
  }
  // The generator folds a nullable union of literals into one enum, keeping "null" in the type but
  // dropping it from the enum, which then refuses the null it means to allow.
  if (Array.isArray(copy.type) && copy.type.includes('null') && Array.isArray(copy.enum) && !copy.enum.includes(null)) {
    copy.enum = [...copy.enum, null];
  }
  if (typeof copy.title !== 'string' || !('type' in copy)) return copy;
  const name = copy.title;
  const known = schemas[name];
  if (known && JSON.stringify(known) !== JSON.stringify(copy)) throw new Error(`Two different schemas are titled ${name}.`);
  schemas[name] = copy;
  return ref(name);
}

// The document, from the routes' own schemas: Elysia's generator for the paths, then what makes it
// whole for linters and client generators (named schemas, examples, servers, security).
function buildDocument(app: AnyElysia, publicUrl: string | undefined) {
  const generated = toOpenAPISchema(app, { paths: [/^\/dashboard/, '/health', /^\/mcp/] });
  // The generator hands back the routes' live schema objects: work on a copy.
  const paths = JSON.parse(JSON.stringify(generated.paths)) as Json;
  liftFailureExamples(paths);
  describeEventStreams(paths);
  describeBinaryDownloads(paths);
  addRequestIds(paths);
  const schemas: Json = { Error: JSON.parse(JSON.stringify(Failure)) };
  return {
    openapi: '3.1.1',
    info: {
      ...info,
      contact: publicUrl
        ? { name: 'The operators of this deployment', url: `${publicUrl}/dashboard` }
        : { name: 'The operators of this deployment' },
    },
    servers: [publicUrl ? { url: publicUrl, description: 'This deployment' } : { url: '/', description: 'The server that serves this document' }],
    security: [{ agentKey: [] }],
    tags,
    paths: publishTitled(paths, schemas),
    webhooks: publishTitled({ 'message.created': messageCreated }, schemas),
    components: {
      securitySchemes: { agentKey },
      schemas,
      parameters: { RequestId: { name: 'X-Request-Id', in: 'header', required: false, description: requestIdDescription, schema: requestIdSchema } },
      headers: {
        RequestId: { required: true, description: requestIdDescription, schema: requestIdSchema },
        RetryAfter: {
          required: false,
          description:
            'Seconds to wait before retrying: on a 503, when the service is busy rather than its database away; on a 429 with code quota_exceeded, until the send quota renews.',
          schema: { type: 'string', pattern: '^[0-9]+$' },
        },
        BearerChallenge: {
          required: true,
          description: 'RFC 6750: `Bearer realm="agent-messaging-service"`, with `error="invalid_token"` when a key was sent.',
          schema: { type: 'string', pattern: '^Bearer realm="agent-messaging-service"(, error="invalid_token")?$' },
        },
      },
    },
  };
}

// The public document covers the agent API only; the dashboard API is private and unversioned.
// Built on first request, when every route is in place, and kept.
export const apiDocs = (publicUrl: string | undefined) => {
  const docs = new Elysia({ name: 'api-docs' });
  let document: ReturnType<typeof buildDocument> | undefined;
  return docs
    .use(referencePage(info, '/openapi/json'))
    .get('/openapi/json', () => (document ??= buildDocument(docs, publicUrl?.replace(/\/+$/, ''))), { detail: { hide: true } });
};
