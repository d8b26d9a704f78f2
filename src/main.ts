#!/usr/bin/env -S bun --no-env-file --config=/dev/null
import { JsonLines, runCommand, usage } from './cli/commands';
import { parseWaitOptions, waitForMail, WAIT_USAGE } from './cli/wait';
import { listen, LISTEN_USAGE, parseListenOptions } from './cli/listen';
import { CHANNEL_USAGE, parseChannelOptions, runChannel } from './cli/channel';
import { loadConfig, localUrl, readEnvironment, serviceUrl, type Config } from './config';
import { openDatabase } from './db/database';
import { EmbeddedPostgresFailed } from './db/embedded';
import { isDatabaseUnavailable } from './db/unavailable';
import { DomainError } from './domain/shared/errors';
import { createLogger, type Logger } from './log';
import { holdPort } from './web/starting';
import { createService, type ServiceOptions, type WorkerService } from './service';
import { welcomeLinks } from './http/welcome-page';

// One entry point for the server, migrations and the admin CLI, so that the single compiled
// executable does all three: `ams`, `ams migrate`, `ams agents create bob`, …
// From a checkout, `bun link` puts this file on the PATH as `ams` (package.json's bin), and its
// first line runs it with Bun's own loading of a `.env` and a bunfig.toml from the working folder
// switched off: `ams` runs in other projects' folders, whose settings are not the service's
// (config.ts reads the checkout's own).
const argv = process.argv.slice(2);
// Below Docker's default health-check time-out (30 s) and the image's own (5 s).
const HEALTHCHECK_TIMEOUT_MS = 4_000;

try {
  const env = readEnvironment();
  const config = loadConfig(env);
  const client = { env, serviceUrl: serviceUrl(config) };
  if (argv.length === 0 || argv[0] === 'serve') await serve(config);
  else if (argv[0] === 'worker') await workerOnly(config);
  else if (argv[0] === 'migrate') await migrateOnly(config);
  else if (argv[0] === 'healthcheck') await healthcheck(config);
  else if (argv[0] === 'wait') await waitCommand(argv.slice(1), client);
  else if (argv[0] === 'listen') await listenCommand(argv.slice(1), client);
  else if (argv[0] === 'channel') await channelCommand(argv.slice(1), client);
  else if (argv[0] === 'help' || argv[0] === '--help') {
    console.log(`Usage:
  serve
  worker
  migrate
  healthcheck
  help
  ${WAIT_USAGE}
  ${LISTEN_USAGE}
  ${CHANNEL_USAGE}
${usage()}`);
  } else await cli(config, argv);
} catch (error) {
  // One sentence that says what is wrong, and for the embedded PostgreSQL what it wrote last.
  createLogger('error').error('start_failed', {
    error: error instanceof Error ? error.message : String(error),
    ...(error instanceof EmbeddedPostgresFailed && { postgresLog: error.lastLines }),
  });
  process.exit(1);
}

async function serve(config: Config) {
  const log = createLogger(config.LOG_LEVEL);
  await runUntilSignal(log, (fail) => startListening(config, log, { http: true, worker: config.WORKER === 'inline', onWorkerFailed: fail }));
}

// The worker alone, for deployments that run the HTTP server and the doorbells separately. It
// serves its health and metrics on PORT, so that a container or orchestrator probe can ask it.
async function workerOnly(config: Config) {
  const log = createLogger(config.LOG_LEVEL);
  await runUntilSignal(log, (fail) => startListening(config, log, { http: false, worker: true, onWorkerFailed: fail }));
}

async function startListening(config: Config, log: Logger, options: Omit<ServiceOptions, 'log'> & { http: boolean }) {
  const holding = holdPort(config.HOST, config.PORT);
  let service: WorkerService;
  try {
    service = options.http ? await createService(config, { ...options, log, http: true }) : await createService(config, { ...options, log, http: false });
  } finally {
    holding.release();
  }
  let port: number;
  try {
    port = service.listen(holding.port);
  } catch (error) {
    await service.stop();
    throw error;
  }
  // Addresses a person can open: where this process listens, and where the service is reached.
  // `url` is one a person can open here; `address` is what is bound, which on 0.0.0.0 (the default
  // HOST) is every interface of the machine, not this machine alone.
  log.info('listening', { url: localUrl(config, port), address: `${config.HOST}:${port}`, ...(options.http && welcomeLinks(serviceUrl(config, port))) });
  return service.stop;
}

// Signals are handled from the first moment: one that arrives while starting waits for the start
// to finish and then stops everything in order, instead of killing the process half-started.
// `fail` stops the same way, then exits with 1 so that the orchestrator starts a fresh process.
async function runUntilSignal(log: Logger, start: (fail: () => void) => Promise<() => Promise<void>>) {
  surviveDatabaseOutages(log);
  let stopping = false;
  const shutdown = async (reason: string, exitCode: number) => {
    if (stopping) return;
    stopping = true;
    log.info('shutting_down', { reason });
    try {
      const stop = await starting;
      await stop();
      log.info('stopped');
      process.exit(exitCode);
    } catch (error) {
      log.error('stop_failed', { error: (error as Error).message });
      process.exit(1);
    }
  };
  const starting = start(() => void shutdown('worker_failed', 1));
  process.on('SIGTERM', () => void shutdown('SIGTERM', 0));
  process.on('SIGINT', () => void shutdown('SIGINT', 0));
  await starting;
}

// graphile-worker does not await the query that marks a finished job complete or failed, so when
// the database drops out at that moment the rejection goes unhandled, and Bun would end the
// process. A database outage is not a reason to stop (the heartbeat gives such jobs back);
// any other unhandled rejection still ends the process as before.
function surviveDatabaseOutages(log: Logger) {
  process.on('unhandledRejection', (reason) => {
    if (isDatabaseUnavailable(reason)) {
      log.warn('database_unavailable', { error: (reason as Error).message, unhandled: true });
      return;
    }
    log.error('unhandled_rejection', { error: reason instanceof Error ? (reason.stack ?? reason.message) : String(reason) });
    process.exit(1);
  });
}

async function migrateOnly(config: Config) {
  const log = createLogger(config.LOG_LEVEL);
  const db = await openDatabase(config, log);
  await db.close();
  console.log(JSON.stringify({ migrated: true }));
}

// For container health checks, where no HTTP client is installed: asks the process in this
// container (`ams serve` or `ams worker`, which each answer for their own role) and prints why it
// is not healthy, which Docker keeps in the container's health log.
async function healthcheck(config: Config) {
  const url = `${localUrl(config)}/health`;
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(HEALTHCHECK_TIMEOUT_MS) });
    const body = (await res.json().catch(() => null)) as { error?: unknown } | null;
    if (res.ok) process.exit(0);
    console.log(typeof body?.error === 'string' ? body.error : `${url} answered ${res.status}.`);
  } catch (error) {
    console.log(`${url} did not answer: ${(error as Error).message}`);
  }
  process.exit(1);
}

// Prints one JSON object (or, for a command that streams, one a line) and exits 0, or a sentence on
// stderr and exits 1.
async function cli(config: Config, args: string[]) {
  const log = createLogger('warn');
  let db: Awaited<ReturnType<typeof openDatabase>> | null = null;
  try {
    db = await openDatabase(config, log);
    const result = await runCommand({ sql: db.sql, config }, args);
    if (result instanceof JsonLines) await writeLines(result);
    else console.log(JSON.stringify(result));
    await db.close();
    process.exit(0);
  } catch (error) {
    console.error(error instanceof DomainError ? error.message : `Error: ${(error as Error).message}`);
    await db?.close().catch(() => {});
    process.exit(1);
  }
}

// Waits for stdout to drain when it is full, so that a long export holds one batch in memory.
async function writeLines({ items }: JsonLines) {
  for await (const item of items) {
    if (!process.stdout.write(`${JSON.stringify(item)}\n`)) await new Promise((resolve) => process.stdout.once('drain', resolve));
  }
}

// The CLI's clients of a running service (`wait`, `listen`, `channel`) need no database. Each exits
// with the code its run answers, or 1 with a sentence on stderr. SIGINT and SIGTERM abort the run,
// which ends cleanly (a command running for an event finishes first).
async function clientCommand(run: (signal: AbortSignal) => Promise<number>) {
  const stop = new AbortController();
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => stop.abort());
  try {
    process.exit(await run(stop.signal));
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    process.exit(1);
  }
}

// What the clients read: AMS_AGENT_KEY and AMS_URL from the same sources as the configuration, and
// the service's own address when no AMS_URL or --base-url says otherwise.
type ClientSettings = { env: Record<string, string | undefined>; serviceUrl: string };

// Exit 0 with the new entries printed, 2 with nothing printed when the timeout passed.
function waitCommand(args: string[], { env, serviceUrl }: ClientSettings) {
  return clientCommand((signal) => waitForMail(parseWaitOptions(args, env, serviceUrl), (text) => console.log(text), signal));
}

function listenCommand(args: string[], { env, serviceUrl }: ClientSettings) {
  return clientCommand((signal) =>
    listen(parseListenOptions(args, env, serviceUrl), { out: (line) => console.log(line), err: (line) => console.error(line), signal }),
  );
}

// Started by a coding-agent host over stdio; it also ends when the host closes its stdin.
function channelCommand(args: string[], { env, serviceUrl }: ClientSettings) {
  return clientCommand((signal) => {
    const closed = new AbortController();
    signal.addEventListener('abort', () => closed.abort());
    process.stdin.on('end', () => closed.abort());
    return runChannel(parseChannelOptions(args, env, serviceUrl), { err: (line) => console.error(line), signal: closed.signal });
  });
}
