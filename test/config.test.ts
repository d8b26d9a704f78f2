import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { envFilePath, loadConfig, readEnvironment, retryDelays } from '../src/config';

const ROOT = resolve(import.meta.dir, '..');
const scratch = mkdtempSync(join(tmpdir(), 'ams-config-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

test('defaults are the contract values', () => {
  const config = loadConfig({});
  expect(config.WEBHOOK_TIMEOUT_MS).toBe(120_000);
  expect(retryDelays(config)).toEqual([1000, 12_000, 148_000]);
  expect(config.REPUBLISH_CRON).toBe('*/15 * * * *');
  expect(config.PUBLISH_ATTEMPTS).toBe(3);
  expect(config.WEBHOOK_ALLOW_LOCAL).toBe(false);
  expect(config.DATABASE_URL).toBeUndefined();
  expect(config.PORT).toBe(3000);
  expect(config.DB_CONNECT_TIMEOUT_S).toBe(5);
});

test('values are read and converted from the environment', () => {
  const config = loadConfig({ PORT: '8080', WEBHOOK_ALLOW_LOCAL: 'true', WEBHOOK_RETRY_DELAYS_MS: '10,20,30', DATABASE_URL: '' });
  expect(config.PORT).toBe(8080);
  expect(config.WEBHOOK_ALLOW_LOCAL).toBe(true);
  expect(retryDelays(config)).toEqual([10, 20, 30]);
  expect(config.DATABASE_URL).toBeUndefined();
});

test('bad values stop the start with the variable named', () => {
  expect(() => loadConfig({ PORT: 'eighty' })).toThrow('PORT');
  expect(() => loadConfig({ WEBHOOK_RETRY_DELAYS_MS: '1s,2s' })).toThrow('WEBHOOK_RETRY_DELAYS_MS');
  expect(() => loadConfig({ LOG_LEVEL: 'loud' })).toThrow('LOG_LEVEL');
  expect(() => loadConfig({ DB_CONNECT_TIMEOUT_S: '0' })).toThrow('DB_CONNECT_TIMEOUT_S');
});

test('a bad value is refused in one sentence that says what the variable must be', () => {
  expect(() => loadConfig({ PORT: 'abc' })).toThrow(new Error('PORT must be a whole number from 0 to 65535.'));
  expect(() => loadConfig({ EMBEDDED_PG_PORT: '70000' })).toThrow(new Error('EMBEDDED_PG_PORT must be a whole number from 1 to 65535.'));
  expect(() => loadConfig({ DB_CONNECT_TIMEOUT_S: '0' })).toThrow(new Error('DB_CONNECT_TIMEOUT_S must be a whole number of at least 1.'));
  expect(() => loadConfig({ WEBHOOK_ALLOW_LOCAL: 'yes please' })).toThrow(new Error('WEBHOOK_ALLOW_LOCAL must be true or false.'));
  expect(() => loadConfig({ WEBHOOK_RETRY_DELAYS_MS: '1s,2s' })).toThrow(
    new Error('WEBHOOK_RETRY_DELAYS_MS must be whole numbers of milliseconds separated by commas, such as 1000,12000,148000.'),
  );
  expect(() => loadConfig({ PORT: '-1', LOG_LEVEL: 'loud' })).toThrow(
    new Error('PORT must be a whole number from 0 to 65535; LOG_LEVEL must be one of debug, info, warn, error.'),
  );
});

test('values that only make sense together are checked together', () => {
  expect(() => loadConfig({ WORKER_HEARTBEAT_MS: '1000', WORKER_STALE_MS: '1999' })).toThrow(
    'WORKER_STALE_MS must be at least twice WORKER_HEARTBEAT_MS.',
  );
  expect(loadConfig({ WORKER_HEARTBEAT_MS: '1000', WORKER_STALE_MS: '2000' }).WORKER_STALE_MS).toBe(2000);
  expect(() => loadConfig({ DATABASE_DIRECT_URL: 'postgres://ams@db:5432/ams' })).toThrow(
    new Error('DATABASE_DIRECT_URL is the direct connection beside a pooler named by DATABASE_URL: set DATABASE_URL too, or neither.'),
  );
  expect(loadConfig({ DATABASE_URL: 'postgres://ams@pooler:6432/ams', DATABASE_DIRECT_URL: 'postgres://ams@db:5432/ams' }).DATABASE_DIRECT_URL).toBe('postgres://ams@db:5432/ams');
  expect(() => loadConfig({ DATABASE_REPLICA_URL: 'postgres://replica.example.internal/ams' })).toThrow(
    new Error('DATABASE_REPLICA_URL needs DATABASE_URL: the replica follows a PostgreSQL of your own, not the embedded one.'),
  );
  expect(loadConfig({ DATABASE_URL: 'postgres://db.example.internal/ams', DATABASE_REPLICA_URL: 'postgres://replica.example.internal/ams' }).DATABASE_REPLICA_URL).toBe(
    'postgres://replica.example.internal/ams',
  );
});

test('from a checkout, settings come from the `.env` at its root, or the file AMS_ENV_FILE names', () => {
  expect(envFilePath({})).toEqual({ path: join(ROOT, '.env'), required: false });
  expect(envFilePath({ AMS_ENV_FILE: '/etc/ams.env' })).toEqual({ path: '/etc/ams.env', required: true });
});

test('the environment wins over the file, even set empty; the file fills in the rest', () => {
  const file = join(scratch, 'precedence.env');
  writeFileSync(file, ['# the server\'s settings', 'PORT=4100', 'WEBHOOK_ALLOW_LOCAL=true', 'LOG_LEVEL=debug', 'AMS_URL="http://127.0.0.1:4100"', ''].join('\n'));
  const env = readEnvironment({ AMS_ENV_FILE: file, PORT: '4200', LOG_LEVEL: '' });
  expect([env.PORT, env.WEBHOOK_ALLOW_LOCAL, env.LOG_LEVEL, env.AMS_URL]).toEqual(['4200', 'true', '', 'http://127.0.0.1:4100']);
  const config = loadConfig(env);
  expect([config.PORT, config.WEBHOOK_ALLOW_LOCAL, config.LOG_LEVEL]).toEqual([4200, true, 'info']);
});

test('a file AMS_ENV_FILE names must be there; the checkout\'s own `.env` is optional', () => {
  const missing = join(scratch, 'missing.env');
  expect(() => readEnvironment({ AMS_ENV_FILE: missing })).toThrow(new Error(`Could not read ${missing} (AMS_ENV_FILE): there is no such file.`));
  expect(readEnvironment({ AMS_ENV_FILE: '/dev/null', PORT: '1' })).toEqual({ AMS_ENV_FILE: '/dev/null', PORT: '1' });
});

test('a relative DATA_DIR is the checkout\'s, from whichever folder the process runs in', () => {
  const cwd = process.cwd();
  process.chdir(scratch);
  try {
    expect(loadConfig({}).DATA_DIR).toBe(join(ROOT, 'data'));
    expect(loadConfig({ DATA_DIR: 'elsewhere/db' }).DATA_DIR).toBe(join(ROOT, 'elsewhere/db'));
    expect(loadConfig({ DATA_DIR: '/srv/ams' }).DATA_DIR).toBe('/srv/ams');
  } finally {
    process.chdir(cwd);
  }
});
