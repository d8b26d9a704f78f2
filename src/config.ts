import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseEnv } from 'node:util';
import { Type as T, type Static, type TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import type { WebhookUrlPolicy } from './domain/agents/webhook-url';
import type { HealthReading, HealthRule } from './domain/agents/endpoint-health';
import type { SearchBounds } from './domain/shared/search-gate';
import type { EnvironmentWebhook } from './domain/people/operator-webhooks';

// The one place that reads the configuration: the environment, over an optional `.env` file.
// Defaults are the contract's values; tests and deployments override them through the same
// variables. Each variable's group and meaning here are what docs/reference/configuration.md
// shows (written by `bun run docs:config`; a test fails while the page differs), so that the one
// table readers see cannot drift from what is read.
type Doc = { group: Group; meaning: string };
export const GROUPS = ['Server', 'Database', 'Bounds on callers', 'Webhooks and the worker', 'Agent event streams', 'People and the dashboard', 'Governing agents', 'MCP and OAuth', 'Files', 'History kept', 'Operations'] as const;
type Group = (typeof GROUPS)[number];
const Int = (defaultValue: number, minimum: number, doc: Doc) => T.Integer({ default: defaultValue, minimum, ...doc });
const Port = (defaultValue: number, minimum: number, doc: Doc) => T.Integer({ default: defaultValue, minimum, maximum: 65_535, ...doc });
const server = (meaning: string): Doc => ({ group: 'Server', meaning });
const database = (meaning: string): Doc => ({ group: 'Database', meaning });
const bounds = (meaning: string): Doc => ({ group: 'Bounds on callers', meaning });
const webhooks = (meaning: string): Doc => ({ group: 'Webhooks and the worker', meaning });
const events = (meaning: string): Doc => ({ group: 'Agent event streams', meaning });
const people = (meaning: string): Doc => ({ group: 'People and the dashboard', meaning });
const governing = (meaning: string): Doc => ({ group: 'Governing agents', meaning });
const mcp = (meaning: string): Doc => ({ group: 'MCP and OAuth', meaning });
const files = (meaning: string): Doc => ({ group: 'Files', meaning });
const history = (meaning: string): Doc => ({ group: 'History kept', meaning });
const operations = (meaning: string): Doc => ({ group: 'Operations', meaning });

// Named because the API's document quotes the sentences these defaults make.
export const DEFAULT_SEARCH_TIMEOUT_MS = 5_000;
export const DEFAULT_HELD_REQUESTS = 100;

export const ConfigSchema = T.Object({
  PORT: Port(3000, 0, server('HTTP port (`ams worker` serves its health and metrics there).')),
  HOST: T.String({ default: '0.0.0.0', ...server('HTTP listen address.') }),
  PUBLIC_URL: T.Optional(
    T.String({
      pattern: '^https?://[^\\s/?#]+(/[^\\s?#]*)?$',
      description: 'an absolute http(s) URL such as https://ams.example.com',
      ...server(
        "The address clients reach the service at (`https://ams.example.com`): the API document's server, the start log's links, the clients' default address, and an `https://` one makes session cookies Secure. Set, it also turns on OAuth sign-in for MCP clients: it is the issuer, and tokens are bound to `{PUBLIC_URL}/mcp`.",
      ),
    }),
  ),
  BODY_LIMIT_BYTES: Int(1_048_576, 1024, server('Larger request bodies are refused with 413 before they are read.')),
  TRUST_PROXY: T.Boolean({
    default: false,
    ...server(
      "Take the client address from a reverse proxy's `X-Forwarded-For` (per-address sign-in and registration limits). `X-Forwarded-Proto: https` always makes session cookies Secure: it can only add protection.",
    ),
  }),
  WORKER: T.Union([T.Literal('inline'), T.Literal('off')], {
    default: 'inline',
    ...server('`inline` runs the webhook worker inside the server; `off` leaves doorbells to a separate `ams worker`.'),
  }),
  LOG_LEVEL: T.Union([T.Literal('debug'), T.Literal('info'), T.Literal('warn'), T.Literal('error')], {
    default: 'info',
    ...server('`debug`, `info`, `warn` or `error`; logs are JSON lines on stderr.'),
  }),
  DATABASE_URL: T.Optional(T.String({ minLength: 1, ...database('PostgreSQL (15 or newer) to use. Unset: the embedded PostgreSQL under `DATA_DIR`, started by the server and shared by `ams`.') })),
  DATABASE_DIRECT_URL: T.Optional(
    T.String({
      minLength: 1,
      ...database(
        "Set when `DATABASE_URL` is a transaction pooler (PgBouncer with `pool_mode = transaction`): a direct connection to the same database, for what needs a session of its own (the LISTEN connections, migrations, the job queue's listener, the worker's two plan-keeping connections). Requests and jobs go through the pooler, without prepared statements; `statement_timeout` must then be set on the database or role (`docs/guides/deploy.md`).",
      ),
    }),
  ),
  DATABASE_REPLICA_URL: T.Optional(
    T.String({
      minLength: 1,
      ...database(
        "A streaming replica of `DATABASE_URL`'s database, for the reads that may be a moment stale: the dashboard's lists and overview, message search and the directory (never the inbox, receipts or idempotent replays, which must see the caller's own writes). While it does not answer, those reads go to `DATABASE_URL` again, and health details and metrics say so. It opens up to `DB_POOL_SIZE` connections of its own.",
      ),
    }),
  ),
  DATA_DIR: T.String({
    default: './data',
    ...database(
      "Where the embedded PostgreSQL keeps its data (it survives restarts); a relative path is the checkout's, from wherever the process starts (the compiled executable's: its working folder).",
    ),
  }),
  EMBEDDED_PG_PORT: Port(54329, 1, database("Port of the embedded PostgreSQL (it listens on 127.0.0.1 only); `ams` finds a running one at the port its server chose.")),
  DB_POOL_SIZE: Int(20, 1, database("Connections in the server's pool.")),
  DB_CONNECT_TIMEOUT_S: Int(5, 1, database('How long a connection attempt to PostgreSQL may take; bounds how long a request waits for its 503 while the database is away.')),
  STATEMENT_TIMEOUT_MS: Int(
    30_000,
    100,
    database('The longest any one statement may run (migrations aside): a request whose statement runs past it is stopped, answered 503 and changes nothing.'),
  ),
  SEARCH_TIMEOUT_MS: Int(
    DEFAULT_SEARCH_TIMEOUT_MS,
    10,
    bounds('How long a search may run before it is stopped in the database (400: narrow it), and how long a search waits for its turn (503).'),
  ),
  SEARCH_CONCURRENCY: Int(
    4,
    1,
    bounds('Searches holding a database connection at once per process (never more than half of `DB_POOL_SIZE`), so that searches leave the inbox and posting connections of their own.'),
  ),
  HELD_REQUESTS_PER_AGENT: Int(
    DEFAULT_HELD_REQUESTS,
    1,
    bounds(
      'Requests one agent may hold open at once on one process: its streams (event streams, MCP GET streams, A2A streams) and its waits (the inbox, receipts, MCP, A2A blocking sends) together; one more is 429.',
    ),
  ),
  A2A_SEND_WAIT_MS: Int(30_000, 0, bounds("How long A2A's blocking `SendMessage` is held for its task to be completed or failed before it answers the task as it stands; `0` answers at once.")),
  IDEMPOTENCY_RETENTION_MS: Int(86_400_000, 1000, bounds('How long an `Idempotency-Key` is remembered (expired keys are swept hourly).')),
  WEBHOOK_TIMEOUT_MS: Int(120_000, 1, webhooks('How long a webhook handler has to answer.')),
  WEBHOOK_RETRY_DELAYS_MS: T.String({
    default: '1000,12000,148000',
    pattern: '^\\d+(,\\d+)*$',
    description: 'whole numbers of milliseconds separated by commas, such as 1000,12000,148000',
    ...webhooks('Delays before each retry (1 attempt + 3 retries).'),
  }),
  WEBHOOK_ALLOW_LOCAL: T.Boolean({
    default: false,
    ...webhooks('Allow `http://`, loopback and private addresses and ports below 1024 for webhooks, A2A pushes and OAuth client metadata documents: for trying webhooks on one machine, and tests; never in production.'),
  }),
  WEBHOOK_CONCURRENCY: Int(32, 1, webhooks("Doorbell jobs run at once per process; a post's doorbell is rung at once by its own process only while fewer than this are in flight.")),
  WEBHOOK_ENDPOINT_CONCURRENCY: Int(
    4,
    1,
    webhooks(
      'Doorbells in flight at once to one webhook URL that is slow or not yet heard from, per process (one answering within a second may use up to half of `WEBHOOK_CONCURRENCY`, from a shared reserve); the rest wait parked, holding no slot.',
    ),
  ),
  WEBHOOK_WARN_AFTER_MS: T.String({
    default: '3600000,86400000',
    pattern: '^(off|\\d+(,\\d+)*)$',
    description: 'off, or whole numbers of milliseconds separated by commas, such as 3600000,86400000',
    ...webhooks('A webhook failing without a 2xx warns people after each of these spells, once each (log, metric, email where SMTP is set); `off` for none.'),
  }),
  WEBHOOK_DISABLE_AFTER_MS: Int(432_000_000, 0, webhooks('After failing this long (5 days) a webhook is switched off and its agent polls until a person switches it back on; `0` never.')),
  WEBHOOK_SLOW_MS: Int(
    2_000,
    1,
    webhooks("A webhook whose p95 over its last 100 attempts is above this many milliseconds reads as slow on the dashboard and in `ams_webhook_endpoints`."),
  ),
  WEBHOOK_SECRET_GRACE_MS: T.Integer({
    default: 86_400_000,
    minimum: 0,
    maximum: 604_800_000,
    ...webhooks("How long a rotated signing secret still signs beside the new one (24 hours) when the person rotating it does not choose; at most 7 days, `0` for none."),
  }),
  REPUBLISH_CRON: T.String({ default: '*/15 * * * *', ...webhooks('When to re-publish doorbells that never reached the queue.') }),
  PUBLISH_ATTEMPTS: Int(3, 1, webhooks('Publish attempts in total before a delivery is marked Failed.')),
  STALLED_AFTER_MS: Int(300_000, 1, webhooks('A delivery Notified this long without a delivered report reads as stalled.')),
  WORKER_HEARTBEAT_MS: Int(3_000, 10, webhooks('How often a worker records that it is alive.')),
  WORKER_STALE_MS: Int(15_000, 50, webhooks('A worker silent this long is taken for dead and its doorbells are picked up by another; at least twice `WORKER_HEARTBEAT_MS`.')),
  EVENT_RETENTION_HOURS: Int(168, 1, events('How long agent events are kept for resuming a stream by id (swept hourly); resuming from before that is 410.')),
  EVENT_HEARTBEAT_MS: Int(15_000, 10, events('How often an idle stream sends a `: keep-alive` comment.')),
  EVENT_STREAM_STALL_MS: Int(60_000, 10, events('A stream whose client leaves events unread this long is cut (it resumes by id).')),
  SMTP_URL: T.Optional(
    T.String({ minLength: 1, ...people('Where sign-in codes and webhook warnings are sent from (`smtps://user:pass@mail.example.com`); unset, sign-in codes are written to the server log.') }),
  ),
  SMTP_FROM: T.String({ default: 'Agent Messaging Service <no-reply@localhost>', ...people('Sender of the emails.') }),
  OPERATOR_WEBHOOK_URL: T.Optional(
    T.String({
      pattern: '^https?://[^\\s]+$',
      description: 'an absolute http(s) URL such as https://hooks.slack.com/services/…',
      ...people(
        "An operator webhook set by the deployment (beside those people add on the dashboard's Notifications page): it is told when an agent's webhook is warned about, switched off or back, when messages wait for approval and when the loop breaker pauses a thread. Held to the rules for agents' webhooks at each send.",
      ),
    }),
  ),
  OPERATOR_WEBHOOK_SECRET: T.Optional(
    T.String({
      pattern: '^whsec_[A-Za-z0-9+/_-]{32,}={0,2}$',
      description: 'a Standard Webhooks secret: whsec_ and at least 24 random bytes in base64, such as whsec_ followed by the output of openssl rand -base64 32',
      ...people('The secret every notice to `OPERATOR_WEBHOOK_URL` is signed with (Standard Webhooks headers); required with it.'),
    }),
  ),
  OPERATOR_WEBHOOK_FORMAT: T.Union([T.Literal('slack'), T.Literal('json')], {
    default: 'slack',
    ...people("`slack`: notices to `OPERATOR_WEBHOOK_URL` are a Slack incoming webhook's body; `json`: a typed JSON event."),
  }),
  OPERATOR_WEBHOOK_RETRY_DELAYS_MS: T.String({
    default: '5000,30000,120000,600000,1800000',
    pattern: '^\\d+(,\\d+)*$',
    description: 'whole numbers of milliseconds separated by commas, such as 5000,30000,120000',
    ...people('Delays before each retry of an operator notice that was not answered with 2xx (1 attempt + 5 retries over about 43 minutes).'),
  }),
  OPERATOR_WEBHOOK_TIMEOUT_MS: Int(10_000, 1, people('How long an operator webhook has to answer a notice.')),
  SESSION_TTL_MS: Int(604_800_000, 60_000, people('How long a dashboard session lasts (7 days).')),
  SESSION_CHECK_MS: Int(
    5_000,
    10,
    people("How often an open dashboard checks that its session has not expired or been signed out through another instance (signing out through the same instance ends it at once)."),
  ),
  MCP_ALLOWED_ORIGINS: T.String({
    default: '',
    pattern: '^$|^\\s*https?://[^\\s,/]+\\s*(,\\s*https?://[^\\s,/]+\\s*)*$',
    description: 'a comma-separated list of origins such as https://agents.example.com',
    ...mcp("Browser origins, besides `PUBLIC_URL`'s and loopback ones, whose pages may call `/mcp` (comma-separated); any other `Origin` is refused (403), against DNS rebinding."),
  }),
  OAUTH_ACCESS_TOKEN_TTL_S: Int(3_600, 60, mcp('Lifetime of an OAuth access token for `/mcp`, in seconds.')),
  OAUTH_REFRESH_TOKEN_TTL_S: Int(2_592_000, 300, mcp('Lifetime of a refresh token (30 days); each use rotates it.')),
  SEND_MESSAGES_PER_MINUTE: Int(
    1_000,
    0,
    governing('Messages one agent may send per minute, unless a person set its own quota; over it, 429 with `Retry-After`. `0`: no quota.'),
  ),
  SEND_THREADS_PER_HOUR: Int(
    500,
    0,
    governing('Threads one agent may open per hour, unless a person set its own quota; over it, 429 with `Retry-After`. `0`: no quota.'),
  ),
  LOOP_BREAKER_MESSAGES: Int(
    50,
    0,
    governing(
      "The loop breaker pauses a thread once its agents (two or more) have exchanged more than this many messages within `LOOP_BREAKER_WINDOW_MINUTES` with no person's message among them; later posts wait for a person. `0`: off.",
    ),
  ),
  LOOP_BREAKER_WINDOW_MINUTES: Int(10, 1, governing('The window the loop breaker counts in.')),
  HOLD_EXPIRES_AFTER_HOURS: Int(168, 1, governing('A held message no person decided on is rejected this many hours after it was sent.')),
  FILE_MAX_BYTES: Int(
    26_214_400,
    1,
    files('The largest file an agent may upload (25 MiB); one byte more is refused with 413 and nothing is kept. Uploads are streamed into PostgreSQL in 256 KiB chunks, never held whole in memory.'),
  ),
  FILE_QUOTA_BYTES: Int(
    1_073_741_824,
    0,
    files("Bytes of files one agent may keep stored at once (1 GiB); an upload past it is refused with 413 and a sentence saying how much is used. A file stops counting when it is deleted. `0`: no quota."),
  ),
  FILES_PER_MESSAGE: T.Integer({ default: 10, minimum: 1, maximum: 100, ...files('Files one message may carry, at most.') }),
  FILE_UNATTACHED_HOURS: Int(24, 1, files('An uploaded file no message carries is deleted after this many hours (swept hourly).')),
  ATTEMPT_LOG_RETENTION_DAYS: Int(30, 1, history('Days of doorbell attempt log kept (pruned hourly).')),
  AUDIT_RETENTION_DAYS: Int(365, 1, history('Days the audit trail of people\'s decisions is kept (pruned hourly).')),
  DEAD_JOB_RETENTION_DAYS: Int(7, 1, history('Days queue jobs that gave up are kept.')),
  MESSAGE_RETENTION_DAYS: T.Optional(
    T.Integer({ minimum: 1, ...history('When set, messages (with their deliveries) older than this are deleted; unset, history is kept (about 1 GiB per million messages).') }),
  ),
  METRICS_TOKEN: T.Optional(
    T.String({ minLength: 16, ...operations('Operator bearer token for `GET /metrics` and `GET /health/details` (at least 16 characters); unset, neither is served.') }),
  ),
  LOSS_AUDIT_INTERVAL_MS: Int(60_000, 100, operations('How often each process runs the loss audit.')),
  LOSS_AUDIT_AFTER_MS: Int(300_000, 1, operations('How long an owed doorbell may lack a job, or a due job wait for a worker, before the audit counts it.')),
  LOSS_AUDIT_WINDOW_MS: Int(86_400_000, 1, operations('How far back the audit checks that every message has its deliveries.')),
});

export type Config = Static<typeof ConfigSchema>;

type Environment = Record<string, string | undefined>;

// The checkout a run from source belongs to (this file is in its src/), wherever it was started
// from: `ams` runs in other projects' folders (a coding agent's hook), and must still find the
// server's settings and data. The compiled executable carries no checkout: its modules live in
// Bun's embedded filesystem, beside no package.json.
const candidateRoot = resolve(import.meta.dir, '..');
const CHECKOUT_ROOT: string | null = existsSync(join(candidateRoot, 'package.json')) ? candidateRoot : null;

// The file read under the environment: AMS_ENV_FILE when it names one (it must exist), otherwise
// `.env` at the checkout's root if there is one. The compiled executable reads none by default:
// a deployment's environment comes from its service manager (systemd's EnvironmentFile, compose,
// a Kubernetes Secret), and a file found in whatever folder a command happens to start in would
// let the server and `ams` run elsewhere disagree. Bun's own loading of `.env` from the working
// folder is switched off (bunfig.toml, the build flags, main.ts's first line), so this is the only
// file that counts.
export function envFilePath(env: Environment = process.env): { path: string; required: boolean } | null {
  if (env.AMS_ENV_FILE) return { path: resolve(env.AMS_ENV_FILE), required: true };
  return CHECKOUT_ROOT ? { path: join(CHECKOUT_ROOT, '.env'), required: false } : null;
}

// The variables the service and the CLI see: the file's, with the environment's on top. A
// variable set in the environment wins even when empty (an empty value counts as unset).
export function readEnvironment(env: Environment = process.env): Environment {
  const file = envFilePath(env);
  if (!file || (!file.required && !existsSync(file.path))) return { ...env };
  let text: string;
  try {
    text = readFileSync(file.path, 'utf8');
  } catch (error) {
    const reason = (error as { code?: unknown }).code === 'ENOENT' ? 'there is no such file' : (error as Error).message;
    throw new Error(`Could not read ${file.path}${file.required ? ' (AMS_ENV_FILE)' : ''}: ${reason}.`);
  }
  return { ...parseEnv(text), ...env };
}

// A numeric setting's default, for what runs without a loaded configuration (scripts, the CLI's
// writes through a pool no server set up).
export const numericDefault = (key: keyof typeof ConfigSchema.properties) => ConfigSchema.properties[key].default as number;

export function loadConfig(env: Environment = readEnvironment()): Config {
  const raw: Record<string, unknown> = {};
  for (const key of Object.keys(ConfigSchema.properties)) {
    const value = env[key];
    if (value !== undefined && value !== '') raw[key] = value;
  }
  const converted = Value.Default(ConfigSchema, Value.Convert(ConfigSchema, raw));
  const invalid = new Set([...Value.Errors(ConfigSchema, converted)].map((e) => e.path.split('/')[1]!));
  if (invalid.size > 0) {
    const rules = [...invalid].map((key) => `${key} must be ${expected(ConfigSchema.properties[key as keyof Config])}`);
    throw new Error(`${rules.join('; ')}.`);
  }
  const config = converted as Config;
  // Relative to the checkout, like the `.env` that may set it, so that `ams` run from any folder
  // finds the server's data; the compiled executable's is relative to where it runs.
  config.DATA_DIR = resolve(CHECKOUT_ROOT ?? process.cwd(), config.DATA_DIR);
  // Otherwise live workers would take each other's jobs between two beats.
  if (config.WORKER_STALE_MS < 2 * config.WORKER_HEARTBEAT_MS) throw new Error('WORKER_STALE_MS must be at least twice WORKER_HEARTBEAT_MS.');
  // Without DATABASE_URL there is no pooler: the embedded server is reached directly.
  if (config.DATABASE_DIRECT_URL && !config.DATABASE_URL) throw new Error('DATABASE_DIRECT_URL is the direct connection beside a pooler named by DATABASE_URL: set DATABASE_URL too, or neither.');
  // A replica of the embedded server would be a second server this process does not run.
  if (config.DATABASE_REPLICA_URL && !config.DATABASE_URL) throw new Error('DATABASE_REPLICA_URL needs DATABASE_URL: the replica follows a PostgreSQL of your own, not the embedded one.');
  // Every notice is signed: a receiver that verifies needs the secret, and Slack ignores it.
  if (config.OPERATOR_WEBHOOK_URL && !config.OPERATOR_WEBHOOK_SECRET) {
    throw new Error(`OPERATOR_WEBHOOK_SECRET must be set with OPERATOR_WEBHOOK_URL: ${expected(ConfigSchema.properties.OPERATOR_WEBHOOK_SECRET)}.`);
  }
  return config;
}

// What a variable must be, in words, from its schema. The value given is not repeated: it may be
// a secret put in the wrong variable.
export function expected(schema: TSchema): string {
  if (schema.description) return schema.description;
  if (schema.anyOf) return `one of ${(schema.anyOf as TSchema[]).map((s) => s.const).join(', ')}`;
  if (schema.type === 'boolean') return 'true or false';
  if (schema.type === 'integer') {
    return schema.maximum === undefined
      ? `a whole number of at least ${schema.minimum}`
      : `a whole number from ${schema.minimum} to ${schema.maximum}`;
  }
  return 'a value that is not empty';
}

export function searchBounds(config: Config): SearchBounds {
  return { timeoutMs: config.SEARCH_TIMEOUT_MS, concurrency: Math.max(1, Math.min(config.SEARCH_CONCURRENCY, Math.floor(config.DB_POOL_SIZE / 2))) };
}

export function retryDelays(config: Config): number[] {
  return config.WEBHOOK_RETRY_DELAYS_MS.split(',').map(Number);
}

// When a failing webhook warns people, and when it is switched off; when one reads as slow or
// not reporting.
export function endpointHealthRule(config: Config): HealthRule & HealthReading {
  return {
    slowMs: config.WEBHOOK_SLOW_MS,
    stalledAfterMs: config.STALLED_AFTER_MS,
    warnAfterMs: config.WEBHOOK_WARN_AFTER_MS === 'off' ? [] : config.WEBHOOK_WARN_AFTER_MS.split(',').map(Number).sort((a, b) => a - b),
    disableAfterMs: config.WEBHOOK_DISABLE_AFTER_MS === 0 ? null : config.WEBHOOK_DISABLE_AFTER_MS,
  };
}

// Where the service may send requests to addresses others chose: doorbells, and OAuth clients'
// metadata documents.
// The operator webhook the environment sets, or null (domain/people/operator-webhooks.ts).
export function environmentOperatorWebhook(config: Config): EnvironmentWebhook | null {
  if (!config.OPERATOR_WEBHOOK_URL || !config.OPERATOR_WEBHOOK_SECRET) return null;
  return { url: config.OPERATOR_WEBHOOK_URL, secret: config.OPERATOR_WEBHOOK_SECRET, format: config.OPERATOR_WEBHOOK_FORMAT };
}

export function operatorRetryDelays(config: Config): number[] {
  return config.OPERATOR_WEBHOOK_RETRY_DELAYS_MS.split(',').map(Number);
}

export function webhookUrlPolicy(config: Config): WebhookUrlPolicy {
  return { allowLocal: config.WEBHOOK_ALLOW_LOCAL };
}

// The server's own address as a program on this machine reaches it: a wildcard HOST is reached on
// loopback. `port` is the one it listens on (PORT=0 picks a free one).
export function localUrl(config: Config, port = config.PORT): string {
  const host = config.HOST === '::' ? '::1' : ['0.0.0.0', ''].includes(config.HOST) ? '127.0.0.1' : config.HOST;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

// Where people and clients reach the service: PUBLIC_URL when it is set, otherwise its local address.
export function serviceUrl(config: Config, port = config.PORT): string {
  return config.PUBLIC_URL?.replace(/\/+$/, '') ?? localUrl(config, port);
}
