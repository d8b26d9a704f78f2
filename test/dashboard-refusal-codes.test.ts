import { beforeAll, describe, expect, test } from 'bun:test';
import { Overloaded } from '../src/db/batcher';
import { DATABASE_UNAVAILABLE } from '../src/db/unavailable';
import { conflict, forbidden, invalid, notFound, rateLimited, unauthorized } from '../src/domain/shared/errors';
import { BodyTooLarge } from '../src/web/body';
import { REFUSAL_CODES, SESSION_ENDED } from '../src/web/dashboard-protocol';
import { refusalFor } from '../src/web/envelope';
import { failureOf, KernelRefusal } from '../src/web/failure';
import { holdPort } from '../src/web/starting';
import { useDashboardHarness } from './support/dashboard';

// The dashboard's own API says what went wrong as a code beside the sentence, so that its pages
// branch on the code; the public API's envelope is the contract's and has none.
const h = useDashboardHarness();
const ZERO_ID = '00000000-0000-7000-8000-000000000000';
let cookie: string;
let key: string;

beforeAll(async () => {
  await h.invite('coded@example.com', 'coded');
  cookie = await h.signIn('coded@example.com');
  key = (await h.agent('coded-agent')).key;
});

const as = (method: string, path: string, body?: unknown) => h.send(method, `/dashboard/api${path}`, { cookie, body });

describe('the dashboard API', () => {
  test('answers each refusal with its code beside the sentence, and the field when it is about one', async () => {
    const cases: [string, Promise<{ status: number; body: unknown }>, number, unknown][] = [
      [
        'no session',
        h.send('GET', '/dashboard/api/me'),
        401,
        { success: false, error: 'Sign in first: there is no session, or it has expired.', code: 'no_session' },
      ],
      [
        'an agent key',
        h.send('GET', '/dashboard/api/me', { cookie, headers: { authorization: `Bearer ${key}` } }),
        401,
        { success: false, error: 'Agent keys are not accepted on the dashboard; a person signs in with an emailed code.', code: 'agent_key' },
      ],
      [
        'a state change without the header',
        h.send('POST', '/dashboard/api/agents', { cookie, csrf: false, body: { username: 'never' } }),
        403,
        {
          success: false,
          error: 'Cross-site request refused: dashboard requests that change state must send x-requested-with: fetch.',
          code: 'cross_site',
        },
      ],
      [
        'a bad username',
        as('POST', '/agents', { username: 'Bad Name' }),
        400,
        {
          success: false,
          error: 'username must be lowercase letters, digits, ".", "_" or "-", starting with a letter or digit',
          code: 'invalid',
          field: 'username',
        },
      ],
      ['a bad cursor', as('GET', '/threads?after=not-an-id'), 400, { success: false, error: 'after must be a cursor taken from the list', code: 'invalid' }],
      ['no such thread', as('GET', `/threads/${ZERO_ID}`), 404, { success: false, error: 'No such thread.', code: 'not_found' }],
      ['a name taken', as('POST', '/agents', { username: 'coded-agent' }), 409, { success: false, error: 'An agent named coded-agent already exists.', code: 'conflict' }],
      ['no such route', as('GET', '/nowhere'), 404, { success: false, error: 'No route for GET /dashboard/api/nowhere.', code: 'no_route' }],
    ];
    for (const [what, reply, status, body] of cases) {
      const res = await reply;
      expect([what, res.status, res.body]).toEqual([what, status, body]);
    }
    const garbage = await h.dash.handle(
      new Request('http://localhost/dashboard/api/agents', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-requested-with': 'fetch', cookie },
        body: '{not json',
      }),
    );
    expect([garbage.status, await garbage.json()]).toEqual([400, { success: false, error: 'The request body is not valid JSON.', code: 'invalid' }]);
  });

  test("the public API's refusals keep the contract's envelope: a sentence, no code", async () => {
    for (const res of [
      await h.call('GET', '/api/threads'),
      await h.call('GET', '/api/threads', { key: 'agt_not-a-key' }),
      await h.call('POST', '/api/threads', { key, body: { title: '' } }),
      await h.call('GET', `/api/threads/${ZERO_ID}`, { key }),
      await h.call('GET', '/api/nowhere', { key }),
      await h.call('GET', '/api/threads/a%00b', { key }),
    ]) {
      expect([res.status >= 400, Object.keys(res.body).sort()]).toEqual([true, ['error', 'success']]);
    }
  });

  test('while the service starts, the held port answers 503 with the code under /dashboard only', async () => {
    const held = holdPort('127.0.0.1', 0);
    try {
      const dashboard = await fetch(`http://127.0.0.1:${held.port}/dashboard/api/me`);
      expect([dashboard.status, await dashboard.json()]).toEqual([503, { success: false, error: DATABASE_UNAVAILABLE, code: 'unavailable' }]);
      const api = await fetch(`http://127.0.0.1:${held.port}/api/threads`);
      expect([api.status, await api.json()]).toEqual([503, { success: false, error: DATABASE_UNAVAILABLE }]);
    } finally {
      held.release();
    }
  });
});

test('one mapping gives every failure its status and code; the code travels only under /dashboard', () => {
  const unreachable = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
  const rows: [unknown, number, string, string | undefined][] = [
    [invalid('title must not be empty', 'title'), 400, 'invalid', 'title'],
    [invalid('The request body is not valid JSON.'), 400, 'invalid', undefined],
    [unauthorized('no'), 401, 'unauthorized', undefined],
    [forbidden('no'), 403, 'forbidden', undefined],
    [notFound('no'), 404, 'not_found', undefined],
    [conflict('no'), 409, 'conflict', undefined],
    [rateLimited('no'), 429, 'rate_limited', undefined],
    [new KernelRefusal('unauthorized', 'no', 'no_session'), 401, 'no_session', undefined],
    [new BodyTooLarge(10), 413, 'too_large', undefined],
    [new Overloaded(), 503, 'busy', undefined],
    [unreachable, 503, 'unavailable', undefined],
    [new Error('a fault of ours'), 500, 'internal', undefined],
  ];
  for (const [error, status, code, field] of rows) {
    const failure = failureOf(error, 'request-1');
    expect([code, failure.status, failure.code, failure.field]).toEqual([code, status, code, field]);
    const coded = refusalFor(new Request('http://localhost/dashboard/api/agents'), failure);
    expect(coded).toEqual({ success: false, error: failure.sentence, code: failure.code, ...(field ? { field } : {}) });
    expect(refusalFor(new Request('http://localhost/api/threads'), failure)).toEqual({ success: false, error: failure.sentence });
    expect(refusalFor(new Request('http://localhost/dashboards'), failure)).toEqual({ success: false, error: failure.sentence });
  }
});

test('docs/internals/dashboard.md lists every code a refusal or an ended session can carry', async () => {
  const docs = await Bun.file(new URL('../docs/internals/dashboard.md', import.meta.url)).text();
  const codes = [...REFUSAL_CODES, ...Object.values(SESSION_ENDED).map((end) => end.code)];
  expect(codes.filter((code) => !docs.includes(`| \`${code}\` |`))).toEqual([]);
});
