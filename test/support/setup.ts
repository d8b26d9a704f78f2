import { afterAll, beforeAll, setDefaultTimeout } from 'bun:test';
import { killChildren } from './children';
import { startTestServer, stopTestServer, TEST_TIMEOUT_MS } from './database';

// Bun reads no timeout from bunfig.toml; hooks and tests get TEST_TIMEOUT_MS (test/support/database.ts).
setDefaultTimeout(TEST_TIMEOUT_MS);

beforeAll(startTestServer, 120_000);
afterAll(killChildren);
afterAll(stopTestServer, 30_000);
