import { runCommand, usage } from './cli/commands';
import { parseWaitOptions, waitForMail, WAIT_USAGE } from './cli/wait';
import { loadConfig, type Config } from './config';
import { openDatabase } from './db/database';
import { EmbeddedPostgresFailed } from './db/embedded';
import { isDatabaseUnavailable } from './db/unavailable';
import { DomainError } from './domain/shared/errors';
import { createLogger, type Logger } from './log';
import { holdPort } from './web/starting';
import { createService, type HttpService } from './service';

// One entry point for the server, migrations and the admin CLI, so that the single compiled
// executable does all three: `ams`, `ams migrate`, `ams agents create bob`, …
const argv = process.argv.slice(2);

try {
  const config = loadConfig();
  if (argv.length === 0 || argv[0] === 'serve') await serve(config);
  else if (argv[0] === 'worker') await workerOnly(config);
  else if (argv[0] === 'migrate') await migrateOnly(config);
  else if (argv[0] === 'healthcheck') await healthcheck(config);
  else if (argv[0] === 'wait') await waitCommand(argv.slice(1));
  else if (argv[0] === 'help' || argv[0] === '--help') {
    console.log(`Usage:
  serve
  worker
  migrate
  healthcheck
  ${WAIT_USAGE}
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
  await runUntilSignal(log, async (fail) => {
    const holding = holdPort(config.HOST, config.PORT);
    let service: HttpService;
    try {
      service = await createService(config, { log, http: true, worker: config.WORKER === 'inline', onWorkerFailed: fail });
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
    log.info('listening', { url: `http://${config.HOST}:${port}` });
    return service.stop;
  });
}

// The worker alone, for deployments that run the HTTP server and the doorbells separately.
async function workerOnly(config: Config) {
  const log = createLogger(config.LOG_LEVEL);
  await runUntilSignal(log, async (fail) => {
    const service = await createService(config, { log, http: false, worker: true, onWorkerFailed: fail });
    return service.stop;
  });
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

// For container health checks, where no HTTP client is installed.
async function healthcheck(config: Config) {
  const res = await fetch(`http://127.0.0.1:${config.PORT}/health`).catch(() => null);
  process.exit(res?.ok ? 0 : 1);
}

// Prints one JSON object and exits 0, or a sentence on stderr and exits 1.
async function cli(config: Config, args: string[]) {
  const log = createLogger('warn');
  let db: Awaited<ReturnType<typeof openDatabase>> | null = null;
  try {
    db = await openDatabase(config, log);
    const result = await runCommand({ sql: db.sql, config }, args);
    console.log(JSON.stringify(result));
    await db.close();
    process.exit(0);
  } catch (error) {
    console.error(error instanceof DomainError ? error.message : `Error: ${(error as Error).message}`);
    await db?.close().catch(() => {});
    process.exit(1);
  }
}

// `ams wait`: an HTTP client of a running service; it needs no database. Exit 0 with the new
// entries printed, 2 with nothing printed when the timeout passed, 1 with a sentence on stderr.
async function waitCommand(args: string[]) {
  try {
    const code = await waitForMail(parseWaitOptions(args, process.env), (text) => console.log(text));
    process.exit(code);
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    process.exit(1);
  }
}
