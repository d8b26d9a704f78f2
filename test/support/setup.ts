import { afterAll, beforeAll, setDefaultTimeout } from 'bun:test';
import { killChildren } from './children';
import { startTestServer, stopTestServer } from './database';

// Bun reads no timeout from bunfig.toml, and its 5 s default is too tight for hooks that create and
// drop databases on a loaded machine. The fault suite asks for more through TEST_TIMEOUT_MS.
setDefaultTimeout(Number(process.env.TEST_TIMEOUT_MS ?? 30_000));

beforeAll(startTestServer, 120_000);
afterAll(killChildren);
afterAll(stopTestServer, 30_000);
