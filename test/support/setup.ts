import { afterAll, beforeAll, setDefaultTimeout } from 'bun:test';
import { killChildren } from './children';
import { startTestServer, stopTestServer, TEST_TIMEOUT_MS } from './database';

// The service and CLI processes that tests start read no `.env` file (src/config.ts): a developer's
// own, at the checkout's root, must not change what the tests see.
process.env.AMS_ENV_FILE = '/dev/null';

// Bun reads no timeout from bunfig.toml, and a default set here holds for the first test file only:
// `bun run test` passes --timeout for every file; this sets the first file's hooks to the same.
setDefaultTimeout(TEST_TIMEOUT_MS);

beforeAll(startTestServer, 120_000);
afterAll(killChildren);
afterAll(stopTestServer, 30_000);
