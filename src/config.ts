import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseEnv } from 'node:util';
import { Type as T, type Static, type TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import type { WebhookUrlPolicy } from './domain/agents/webhook-url';
import type { HealthRule } from './domain/agents/endpoint-health';
import type { SearchBounds } from './domain/shared/search-gate';

// The one place that reads the configuration: the environment, over an optional `.env` file.
// Defaults are the contract's values; tests and deployments override them through the same
// variables.
const Int = (defaultValue: number, minimum = 0) => T.Integer({ default: defaultValue, minimum });
const Port = (defaultValue: number, minimum: number) => T.Integer({ default: defaultValue, minimum, maximum: 65_535 });

// Named because the API's document quotes the sentences these defaults make.
export const DEFAULT_SEARCH_TIMEOUT_MS = 5_000;
export const DEFAULT_HELD_REQUESTS = 100;

export const ConfigSchema = T.Object({
  PORT: Port(3000, 0),
  HOST: T.String({ default: '0.0.0.0' }),
  DATABASE_URL: T.Optional(T.String({ minLength: 1 })),
  DATA_DIR: T.String({ default: './data' }),
  EMBEDDED_PG_PORT: Port(54329, 1),
  DB_POOL_SIZE: Int(20, 1),
  DB_CONNECT_TIMEOUT_S: Int(5, 1),
  // The longest any one statement of the service's pool may run (migrations aside): a request
  // whose statement runs past it is answered 503 and changes nothing.
  STATEMENT_TIMEOUT_MS: Int(30_000, 100),
  // The address clients reach the service at (https://ams.example.com). Also turns on OAuth sign-in
  // for MCP clients: it is the authorization server's issuer and names the /mcp resource.
  PUBLIC_URL: T.Optional(
    T.String({ pattern: '^https?://[^\\s/?#]+(/[^\\s?#]*)?$', description: 'an absolute http(s) URL such as https://ams.example.com' }),
  ),
  // OAuth for MCP clients (src/oauth): access tokens are short-lived; refresh tokens rotate at every use.
  OAUTH_ACCESS_TOKEN_TTL_S: Int(3_600, 60),
  OAUTH_REFRESH_TOKEN_TTL_S: Int(2_592_000, 300),
  // Browser origins, besides PUBLIC_URL's and loopback ones, whose pages may call /mcp (comma-separated,
  // e.g. "https://agents.example.com"); any other Origin is refused (DNS-rebinding protection).
  MCP_ALLOWED_ORIGINS: T.String({
    default: '',
    pattern: '^$|^\\s*https?://[^\\s,/]+\\s*(,\\s*https?://[^\\s,/]+\\s*)*$',
    description: 'a comma-separated list of origins such as https://agents.example.com',
  }),
  // History kept (domain/messages/retention.ts): the attempt log and dead queue jobs are pruned after these
  // many days; messages, with their deliveries, only if MESSAGE_RETENTION_DAYS is set.
  ATTEMPT_LOG_RETENTION_DAYS: Int(30, 1),
  DEAD_JOB_RETENTION_DAYS: Int(7, 1),
  MESSAGE_RETENTION_DAYS: T.Optional(T.Integer({ minimum: 1 })),
  // Agent event streams (GET /api/events, domain/deliveries/agent-events.ts): how long events are kept
  // for resuming, a heartbeat comment's interval, and how long a client may leave events unread before it is cut.
  EVENT_RETENTION_HOURS: Int(168, 1),
  EVENT_HEARTBEAT_MS: Int(15_000, 10),
  EVENT_STREAM_STALL_MS: Int(60_000, 10),
  // Requests one agent may hold open at once on one process: its streams (event streams, MCP GET
  // streams, A2A streams) and its waits (inbox, receipts, MCP, A2A blocking sends) together
  // (web/held-requests.ts).
  HELD_REQUESTS_PER_AGENT: Int(DEFAULT_HELD_REQUESTS, 1),
  // How long A2A's blocking SendMessage (returnImmediately false) is held for its task to end before
  // it answers the task as it stands (docs/a2a.md); 0 answers at once.
  A2A_SEND_WAIT_MS: Int(30_000, 0),
  // How long an Idempotency-Key is remembered: a repeat within it answers the first answer.
  IDEMPOTENCY_RETENTION_MS: Int(86_400_000, 1000),
  // Searches (domain/shared/search-gate.ts): how long a search's statement may run before it is
  // stopped, and how many may hold a database connection at once in a process (never more than
  // half of DB_POOL_SIZE, so that searches leave the inbox and posting connections of their own).
  SEARCH_TIMEOUT_MS: Int(DEFAULT_SEARCH_TIMEOUT_MS, 10),
  SEARCH_CONCURRENCY: Int(4, 1),
  // Bearer token a Prometheus scraper (GET /metrics) or an operator (GET /health/details) sends; unset, neither is served.
  METRICS_TOKEN: T.Optional(T.String({ minLength: 16 })),
  // The loss audit (domain/deliveries/loss-audit.ts): how often it runs, how old an owed doorbell must be to
  // count, and how far back messages are checked.
  LOSS_AUDIT_INTERVAL_MS: Int(60_000, 100),
  LOSS_AUDIT_AFTER_MS: Int(300_000, 1),
  LOSS_AUDIT_WINDOW_MS: Int(86_400_000, 1),
  BODY_LIMIT_BYTES: Int(1_048_576, 1024),
  WEBHOOK_TIMEOUT_MS: Int(120_000, 1),
  WEBHOOK_RETRY_DELAYS_MS: T.String({
    default: '1000,12000,148000',
    pattern: '^\\d+(,\\d+)*$',
    description: 'whole numbers of milliseconds separated by commas, such as 1000,12000,148000',
  }),
  WEBHOOK_ALLOW_LOCAL: T.Boolean({ default: false }),
  WEBHOOK_CONCURRENCY: Int(32, 1),
  // Doorbells in flight at once to one webhook URL, per process: a slow or dead handler holds no
  // more worker slots than this.
  WEBHOOK_ENDPOINT_CONCURRENCY: Int(4, 1),
  // Endpoint health (domain/agents/endpoint-health.ts): a webhook failing without a success warns
  // people after each of these spells (off: never), and is switched off after the last one (0: never).
  WEBHOOK_WARN_AFTER_MS: T.String({
    default: '3600000,86400000',
    pattern: '^(off|\\d+(,\\d+)*)$',
    description: 'off, or whole numbers of milliseconds separated by commas, such as 3600000,86400000',
  }),
  WEBHOOK_DISABLE_AFTER_MS: Int(432_000_000, 0),
  REPUBLISH_CRON: T.String({ default: '*/15 * * * *' }),
  PUBLISH_ATTEMPTS: Int(3, 1),
  STALLED_AFTER_MS: Int(300_000, 1),
  // Sign-in codes go out over SMTP (nodemailer URL, e.g. smtps://user:pass@mail.example.com);
  // unset, they are written to the server log instead, for local development.
  SMTP_URL: T.Optional(T.String({ minLength: 1 })),
  SMTP_FROM: T.String({ default: 'Agent Messaging Service <no-reply@localhost>' }),
  SESSION_TTL_MS: Int(604_800_000, 60_000),
  // How often an open live view checks that its session has not expired or been signed out elsewhere.
  SESSION_CHECK_MS: Int(5_000, 10),
  // Behind a reverse proxy, the client address for sign-in rate limits comes from X-Forwarded-For.
  TRUST_PROXY: T.Boolean({ default: false }),
  WORKER: T.Union([T.Literal('inline'), T.Literal('off')], { default: 'inline' }),
  WORKER_HEARTBEAT_MS: Int(3_000, 10),
  WORKER_STALE_MS: Int(15_000, 50),
  LOG_LEVEL: T.Union([T.Literal('debug'), T.Literal('info'), T.Literal('warn'), T.Literal('error')], {
    default: 'info',
  }),
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
  return config;
}

// What a variable must be, in words, from its schema. The value given is not repeated: it may be
// a secret put in the wrong variable.
function expected(schema: TSchema): string {
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

// When a failing webhook warns people, and when it is switched off.
export function endpointHealthRule(config: Config): HealthRule {
  return {
    warnAfterMs: config.WEBHOOK_WARN_AFTER_MS === 'off' ? [] : config.WEBHOOK_WARN_AFTER_MS.split(',').map(Number).sort((a, b) => a - b),
    disableAfterMs: config.WEBHOOK_DISABLE_AFTER_MS === 0 ? null : config.WEBHOOK_DISABLE_AFTER_MS,
  };
}

// Where the service may send requests to addresses others chose: doorbells, and OAuth clients'
// metadata documents.
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
