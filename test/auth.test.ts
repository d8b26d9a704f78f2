import { describe, expect, test } from 'bun:test';
import { setArchived } from '../src/domain/agents/agents';
import { hashKey } from '../src/domain/agents/keys';
import { uniqueName, useHarness } from './support/harness';
import { BY_CLI } from '../src/domain/people/audit';

const h = useHarness();

describe('agent authentication', () => {
  test('a valid key reaches the API', async () => {
    const a = await h.agent(uniqueName('auth'));
    const res = await h.call('GET', '/api/threads', { key: a.key });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, data: [] });
  });

  test.each([
    ['missing header', {}, 'Authorization header is missing; send "Authorization: Bearer agt_…".'],
    ['not Bearer', { authorization: 'Basic abc' }, 'Authorization header is malformed; expected "Bearer agt_…".'],
    ['Bearer without a key', { authorization: 'Bearer ' }, 'Authorization header is malformed; expected "Bearer agt_…".'],
    ['wrong prefix', { authorization: `Bearer sk_${'a'.repeat(43)}` }, 'The API key is malformed: an agent key is agt_ and 43 more letters, digits, - or _; check that it was copied whole.'],
    ['too short', { authorization: 'Bearer agt_abc' }, 'The API key is malformed: an agent key is agt_ and 43 more letters, digits, - or _; check that it was copied whole.'],
    [
      'well formed but unknown',
      { authorization: `Bearer agt_${'A'.repeat(43)}` },
      'The API key is not recognised or its agent is archived.',
    ],
  ])('%s → 401', async (_, headers, error) => {
    for (const [method, path] of [
      ['GET', '/api/deliveries'],
      ['GET', '/api/threads'],
      ['POST', '/api/threads'],
      ['POST', '/api/deliveries/01a1ff80-d963-77fb-8efa-675ab5c7dfaa/delivered'],
    ] as const) {
      const res = await h.call(method, path, { headers });
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ success: false, error });
    }
  });

  test('401 comes before body validation and JSON parsing', async () => {
    const headers = { authorization: `Bearer agt_${'B'.repeat(43)}`, 'content-type': 'application/json' };
    const invalidBody = await h.call('POST', '/api/threads', { headers, body: { title: '' } });
    expect(invalidBody.status).toBe(401);
    const brokenJson = await h.call('POST', '/api/threads', { headers, raw: '{not json' });
    expect(brokenJson.status).toBe(401);
    expect(brokenJson.body.success).toBe(false);
  });

  test('archiving revokes the key and unarchiving restores the same key', async () => {
    const a = await h.agent(uniqueName('arch'));
    await setArchived(h.db.sql, BY_CLI, a.username, true);
    const refused = await h.call('GET', '/api/deliveries', { key: a.key });
    expect(refused.status).toBe(401);
    expect(refused.body).toEqual({ success: false, error: 'The API key is not recognised or its agent is archived.' });
    await setArchived(h.db.sql, BY_CLI, a.username, false);
    const restored = await h.call('GET', '/api/deliveries', { key: a.key });
    expect(restored.status).toBe(200);
  });

  test('keys are stored only as their SHA-256', async () => {
    const a = await h.agent(uniqueName('hash'));
    expect(a.key).toMatch(/^agt_[A-Za-z0-9_-]{43}$/);
    const [row] = await h.db.sql`select key_hash from agents where username = ${a.username}`;
    expect(Buffer.from(row!.key_hash)).toEqual(hashKey(a.key));
    const [leak] = await h.db.sql`
      select count(*)::int as n from agents where encode(key_hash, 'escape') like ${'%' + a.key + '%'}`;
    expect(leak!.n).toBe(0);
  });

  test('the Bearer scheme is case-insensitive', async () => {
    const a = await h.agent(uniqueName('case'));
    const res = await h.call('GET', '/api/threads', { headers: { authorization: `bearer ${a.key}` } });
    expect(res.status).toBe(200);
  });
});
