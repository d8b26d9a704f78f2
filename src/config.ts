import { Type as T, type Static, type TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import type { WebhookUrlPolicy } from './domain/agents/webhook-url';
import type { HealthRule } from './domain/agents/endpoint-health';

// The one place that reads the environment. Defaults are the contract's values; tests and
// deployments override them through the same variables.
const Int = (defaultValue: number, minimum = 0) => T.Integer({ default: defaultValue, minimum });
const Port = (defaultValue: number, minimum: number) => T.Integer({ default: defaultValue, minimum, maximum: 65_535 });

export const ConfigSchema = T.Object({
  PORT: Port(3000, 0),
  HOST: T.String({ default: '0.0.0.0' }),
  DATABASE_URL: T.Optional(T.String({ minLength: 1 })),
  DATA_DIR: T.String({ default: './data' }),
  EMBEDDED_PG_PORT: Port(54329, 1),
  DB_POOL_SIZE: Int(20, 1),
  DB_CONNECT_TIMEOUT_S: Int(5, 1),
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
  // How long A2A's blocking SendMessage (returnImmediately false) is held for its task to end before
  // it answers the task as it stands (docs/a2a.md); 0 answers at once.
  A2A_SEND_WAIT_MS: Int(30_000, 0),
  // How long an Idempotency-Key is remembered: a repeat within it answers the first answer.
  IDEMPOTENCY_RETENTION_MS: Int(86_400_000, 1000),
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

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
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
