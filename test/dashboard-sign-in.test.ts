import { describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { runCommand } from '../src/cli/commands';
import type { DomainError } from '../src/domain/shared/errors';
import { SIGN_IN, sweepExpiredSignIns } from '../src/domain/people/people';
import { sessionCookieOf, useDashboardHarness } from './support/dashboard';

const h = useDashboardHarness();
const sha256 = (text: string) => createHash('sha256').update(text).digest();

const requestCode = (email: string, client?: string) => h.send('POST', '/dashboard/api/sign-in/code', { body: { email }, client });
const verify = (email: string, code: string | undefined, client?: string) =>
  h.send('POST', '/dashboard/api/sign-in/verify', { body: { email, code }, client });

describe('people invite', () => {
  test('stores the person with a lowercased email and prints { email, username }', async () => {
    expect(await runCommand({ sql: h.db.sql, config: h.config }, ['people', 'invite', 'Grace@Example.COM', 'grace'])).toEqual({
      email: 'grace@example.com',
      username: 'grace',
    });
    const rows = await h.db.sql`select email, username from people where username = 'grace'`;
    expect([...rows]).toEqual([{ email: 'grace@example.com', username: 'grace' }]);
  });

  test('refuses a second invitation, a taken username, an agent name and a bad address', async () => {
    await h.agent('builder-bot');
    const cli = (email: string, username: string) =>
      runCommand({ sql: h.db.sql, config: h.config }, ['people', 'invite', email, username]).catch((e: DomainError) => e) as Promise<DomainError>;
    const twice = await cli('grace@example.com', 'grace2');
    expect([twice.kind, twice.message]).toEqual(['conflict', 'grace@example.com is already invited.']);
    const taken = await cli('other@example.com', 'grace');
    expect([taken.kind, taken.message]).toEqual(['conflict', 'A person is already named grace; choose another username.']);
    const agent = await cli('bot@example.com', 'builder-bot');
    expect([agent.kind, agent.message]).toEqual(['conflict', 'An agent is already named builder-bot; choose another username.']);
    const bad = await cli('not-an-address', 'someone');
    expect([bad.kind, bad.message]).toEqual(['invalid', 'email must be an email address such as ada@example.com']);
    expect((await h.db.sql`select count(*)::int as n from people`)[0]!.n).toBe(1);
  });
});

describe('sign-in codes', () => {
  test('a known and an unknown address get the same answer; only the known one is sent a code, stored hashed', async () => {
    await h.invite('ada@example.com', 'ada');
    const known = await requestCode('Ada@Example.com');
    const unknown = await requestCode('nobody@example.com');
    expect(known.status).toBe(200);
    expect(unknown.status).toBe(200);
    expect(known.body.data.message.replace('ada@example.com', 'X')).toBe(unknown.body.data.message.replace('nobody@example.com', 'X'));
    expect(known.body).toEqual({
      success: true,
      data: { message: 'If ada@example.com belongs to an invited person, a sign-in code is on its way. It is valid for 10 minutes.' },
    });
    const code = h.lastCode('ada@example.com')!;
    expect(code).toMatch(/^\d{6}$/);
    expect(h.lastCode('nobody@example.com')).toBeUndefined();
    const [stored] = await h.db.sql`
      select c.code_hash, c.expires_at - c.created_at as ttl, p.id from sign_in_codes c join people p on p.id = c.person_id`;
    expect(Buffer.from(stored!.code_hash)).toEqual(sha256(`${stored!.id}:${code}`));
    expect(stored!.ttl).toBe('00:10:00');
  });

  test('the right code opens a session: HttpOnly, SameSite=Lax, stored hashed; the code works once', async () => {
    await requestCode('ada@example.com');
    const code = h.lastCode('ada@example.com')!;
    const res = await verify('ada@example.com', code);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, data: { email: 'ada@example.com', username: 'ada' } });
    const cookie = res.headers.get('set-cookie')!;
    expect(cookie).toMatch(/^ams_session=[A-Za-z0-9_-]{43}; Path=\/dashboard; Max-Age=604800; HttpOnly; SameSite=Lax$/);
    const token = cookie.split(';')[0]!.split('=')[1]!;
    const sessions = await h.db.sql`
      select s.token_hash, p.username, round(extract(epoch from s.expires_at - s.created_at)) as ttl
      from sessions s join people p on p.id = s.person_id`;
    expect(sessions).toHaveLength(1);
    expect(Buffer.from(sessions[0]!.token_hash)).toEqual(sha256(token));
    expect([sessions[0]!.username, Number(sessions[0]!.ttl)]).toEqual(['ada', 604800]);
    expect((await h.db.sql`select count(*)::int as n from sign_in_codes`)[0]!.n).toBe(0);
    expect(JSON.stringify(h.logLines)).not.toContain(token);

    const again = await verify('ada@example.com', code);
    expect(again.status).toBe(400);
    expect(again.body).toEqual({ success: false, error: 'That code is wrong or has expired; request a new one.', code: 'invalid' });
    const me = await h.send('GET', '/dashboard/api/me', { cookie: sessionCookieOf(res) });
    expect(me.body).toEqual({ success: true, data: { email: 'ada@example.com', username: 'ada' } });
  });

  test('an unknown address never gets a session, whatever code is tried', async () => {
    const before = (await h.db.sql`select count(*)::int as n from sessions`)[0]!.n;
    const res = await verify('nobody@example.com', '123456');
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ success: false, error: 'That code is wrong or has expired; request a new one.', code: 'invalid' });
    expect(res.headers.get('set-cookie')).toBeNull();
    expect((await h.db.sql`select count(*)::int as n from sessions`)[0]!.n).toBe(before);
  });

  test('an expired code is refused', async () => {
    await requestCode('ada@example.com');
    await h.db.sql`update sign_in_codes set expires_at = now() - interval '1 second'`;
    const res = await verify('ada@example.com', h.lastCode('ada@example.com'));
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('That code is wrong or has expired; request a new one.');
  });

  test('asking again replaces the outstanding code', async () => {
    await requestCode('ada@example.com');
    const first = h.lastCode('ada@example.com')!;
    await requestCode('ada@example.com');
    const second = h.lastCode('ada@example.com')!;
    expect((await h.db.sql`select count(*)::int as n from sign_in_codes`)[0]!.n).toBe(1);
    if (first !== second) expect((await verify('ada@example.com', first)).status).toBe(400);
    expect((await verify('ada@example.com', second)).status).toBe(200);
  });

  test('a body over 4 KiB to either sign-in route is refused with 413 before it is parsed, declared or streamed', async () => {
    await h.db.sql`delete from sign_in_attempts`;
    const big = JSON.stringify({ email: 'ada@example.com', code: '123456', padding: 'x'.repeat(100 * 1024) });
    const refusal = { success: false, error: 'The request body is larger than the limit of 4096 bytes.', code: 'too_large' };
    for (const route of ['code', 'verify']) {
      const declared = await h.send('POST', `/dashboard/api/sign-in/${route}`, { headers: { 'content-type': 'application/json' }, body: JSON.parse(big) });
      expect([route, declared.status, declared.body]).toEqual([route, 413, refusal]);
      const unsized = new Request(`http://localhost/dashboard/api/sign-in/${route}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-requested-with': 'fetch', 'x-forwarded-for': '203.0.113.40' },
        body: new Blob([big]).stream(),
      });
      expect(unsized.headers.get('content-length')).toBeNull();
      const streamed = await h.dash.handle(unsized);
      expect([route, streamed.status, await streamed.json()]).toEqual([route, 413, refusal]);
    }
    expect((await h.db.sql`select count(*)::int as n from sign_in_attempts`)[0]!.n).toBe(0);
  });

  test('bad input is a 400 naming the field', async () => {
    const res = await h.send('POST', '/dashboard/api/sign-in/code', { body: { email: 'no' } });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ success: false, error: 'email must be at least 3 characters', code: 'invalid', field: 'email' });
    const missing = await h.send('POST', '/dashboard/api/sign-in/verify', { body: { email: 'ada@example.com' } });
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual({ success: false, error: 'code is required', code: 'invalid', field: 'code' });
  });

  test('an email address with an unpaired surrogate is a 400 naming the field, and no attempt is recorded', async () => {
    const unpaired = 'email must not contain an unpaired surrogate (U+D800 to U+DFFF), which is not valid Unicode';
    const before = await h.db.sql`select count(*)::int as n from sign_in_attempts`;
    const res = await requestCode('\ud800@example.com');
    expect([res.status, res.body]).toEqual([400, { success: false, error: unpaired, code: 'invalid', field: 'email' }]);
    const check = await verify('\udfff@example.com', '123456');
    expect([check.status, check.body]).toEqual([400, { success: false, error: unpaired, code: 'invalid', field: 'email' }]);
    const invited = await runCommand({ sql: h.db.sql, config: h.config }, ['people', 'invite', '\ud83d@example.com', 'halfway']).catch(
      (e: DomainError) => [e.kind, e.message],
    );
    expect(invited).toEqual(['invalid', unpaired]);
    expect(await h.db.sql`select count(*)::int as n from sign_in_attempts`).toEqual(before);
    expect((await h.db.sql`select count(*)::int as n from people where username = 'halfway'`)[0]!.n).toBe(0);
  });
});

describe('sign-in rate limits (429)', () => {
  test('code requests per email', async () => {
    await h.db.sql`delete from sign_in_attempts`;
    for (let i = 0; i < SIGN_IN.codeRequestsPerEmail; i++) expect((await requestCode('limited@example.com')).status).toBe(200);
    const res = await requestCode('Limited@example.com');
    expect(res.status).toBe(429);
    expect(res.body).toEqual({ success: false, error: 'Too many sign-in codes were requested; wait a few minutes and try again.', code: 'rate_limited' });
    const [row] = await h.db.sql`select count(*)::int as n from sign_in_attempts where kind = 'code_request' and email = 'limited@example.com'`;
    expect(row!.n).toBe(SIGN_IN.codeRequestsPerEmail);
  });

  test('code requests per client address, across addresses', async () => {
    await h.db.sql`delete from sign_in_attempts`;
    for (let i = 0; i < SIGN_IN.codeRequestsPerClient; i++) {
      expect((await requestCode(`user${i}@example.com`, '203.0.113.7')).status).toBe(200);
    }
    expect((await requestCode('fresh@example.com', '203.0.113.7')).status).toBe(429);
    expect((await requestCode('fresh@example.com', '203.0.113.8')).status).toBe(200);
  });

  test('wrong codes per email and address: that address is refused even the right code, the person elsewhere signs in', async () => {
    await h.db.sql`delete from sign_in_attempts`;
    await requestCode('ada@example.com', '203.0.113.20');
    const code = h.lastCode('ada@example.com')!;
    const wrong = code === '000000' ? '111111' : '000000';
    for (let i = 0; i < SIGN_IN.wrongCodesPerEmailAndClient; i++) expect((await verify('ada@example.com', wrong, '203.0.113.66')).status).toBe(400);
    const res = await verify('ada@example.com', code, '203.0.113.66');
    expect(res.status).toBe(429);
    expect(res.body).toEqual({ success: false, error: 'Too many wrong codes; wait a few minutes, then request a new code.', code: 'rate_limited' });
    expect(res.headers.get('set-cookie')).toBeNull();

    const own = await verify('ada@example.com', code, '203.0.113.20');
    expect(own.status).toBe(200);
    expect(own.body).toEqual({ success: true, data: { email: 'ada@example.com', username: 'ada' } });
  });

  test('wrong codes per email across addresses: a distributed guess is stopped at the higher ceiling', async () => {
    await h.db.sql`delete from sign_in_attempts`;
    await requestCode('ada@example.com');
    const code = h.lastCode('ada@example.com')!;
    const wrong = code === '000000' ? '111111' : '000000';
    for (let i = 0; i < SIGN_IN.wrongCodesPerEmail; i++) expect((await verify('ada@example.com', wrong, `192.0.2.${i}`)).status).toBe(400);
    const res = await verify('ada@example.com', code, '192.0.2.200');
    expect(res.status).toBe(429);
    expect(res.body).toEqual({ success: false, error: 'Too many wrong codes; wait a few minutes, then request a new code.', code: 'rate_limited' });
    const [row] = await h.db.sql`select count(*)::int as n from sign_in_attempts where kind = 'wrong_code' and email = 'ada@example.com'`;
    expect(row!.n).toBe(SIGN_IN.wrongCodesPerEmail);
  });

  test('wrong codes per client address, across addresses; a right code gives its slot back', async () => {
    await h.db.sql`delete from sign_in_attempts`;
    await requestCode('ada@example.com', '203.0.113.9');
    expect((await verify('ada@example.com', h.lastCode('ada@example.com'), '203.0.113.9')).status).toBe(200);
    for (let i = 0; i < SIGN_IN.wrongCodesPerClient; i++) {
      expect((await verify(`guess${i}@example.com`, '123456', '203.0.113.9')).status).toBe(400);
    }
    expect((await verify('another@example.com', '123456', '203.0.113.9')).status).toBe(429);
    const [row] = await h.db.sql`select count(*)::int as n from sign_in_attempts where kind = 'wrong_code' and client = '203.0.113.9'`;
    expect(row!.n).toBe(SIGN_IN.wrongCodesPerClient);
  });

  test('parallel guesses from one address cannot overrun its limit', async () => {
    await h.db.sql`delete from sign_in_attempts`;
    const replies = await Promise.all(Array.from({ length: 12 }, () => verify('ada@example.com', '999999', '203.0.113.30')));
    expect(replies.filter((r) => r.status === 429)).toHaveLength(12 - SIGN_IN.wrongCodesPerEmailAndClient);
  });

  test('parallel guesses from many addresses cannot overrun the per-email ceiling', async () => {
    await h.db.sql`delete from sign_in_attempts`;
    const guesses = SIGN_IN.wrongCodesPerEmail + 10;
    const replies = await Promise.all(Array.from({ length: guesses }, (_, i) => verify('ada@example.com', '999999', `198.18.0.${i}`)));
    expect(replies.filter((r) => r.status === 429)).toHaveLength(10);
  });

  test('parallel guesses from one address across many emails cannot overrun its limit', async () => {
    await h.db.sql`delete from sign_in_attempts`;
    const guesses = SIGN_IN.wrongCodesPerClient + 10;
    const replies = await Promise.all(Array.from({ length: guesses }, (_, i) => verify(`spread${i}@example.com`, '999999', '203.0.113.31')));
    expect(replies.filter((r) => r.status === 429)).toHaveLength(10);
  });
});

describe('sessions', () => {
  test('Secure behind a TLS-terminating proxy (X-Forwarded-Proto: https)', async () => {
    await h.db.sql`delete from sign_in_attempts`;
    await requestCode('ada@example.com');
    const res = await h.send('POST', '/dashboard/api/sign-in/verify', {
      body: { email: 'ada@example.com', code: h.lastCode('ada@example.com') },
      headers: { 'x-forwarded-proto': 'https' },
    });
    expect(res.headers.get('set-cookie')).toEndWith('; Max-Age=604800; Secure; HttpOnly; SameSite=Lax');
  });

  test('an expired session is refused', async () => {
    await h.db.sql`delete from sign_in_attempts`;
    const cookie = await h.signIn('ada@example.com');
    expect((await h.send('GET', '/dashboard/api/me', { cookie })).status).toBe(200);
    await h.db.sql`update sessions set expires_at = now() - interval '1 second'`;
    const res = await h.send('GET', '/dashboard/api/me', { cookie });
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ success: false, error: 'Sign in first: there is no session, or it has expired.', code: 'no_session' });
  });

  test('sign-out deletes the session and clears the cookie', async () => {
    const cookie = await h.signIn('ada@example.com');
    const token = cookie.split('=')[1]!;
    const res = await h.send('POST', '/dashboard/api/sign-out', { cookie });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, data: { message: 'Signed out.' } });
    expect(res.headers.get('set-cookie')).toBe('ams_session=; Path=/dashboard; Max-Age=0; HttpOnly; SameSite=Lax');
    const [row] = await h.db.sql`select count(*)::int as n from sessions where token_hash = ${sha256(token)}`;
    expect(row!.n).toBe(0);
    expect((await h.send('GET', '/dashboard/api/me', { cookie })).status).toBe(401);
  });
});

describe('the hourly sweep', () => {
  test('removes expired sessions and codes, and only those', async () => {
    await h.db.sql`delete from sign_in_attempts`;
    const live = await h.signIn('ada@example.com');
    const expired = await h.signIn('ada@example.com');
    await h.db.sql`update sessions set expires_at = now() - interval '1 second' where token_hash = ${sha256(expired.split('=')[1]!)}`;
    await requestCode('ada@example.com');
    await h.db.sql`update sign_in_codes set expires_at = now() - interval '1 second'`;
    const before = await h.db.sql`select (select count(*)::int from sessions) as sessions, (select count(*)::int from sign_in_codes) as codes`;
    expect(await sweepExpiredSignIns(h.db.sql)).toEqual({ sessions: 1, codes: 1 });
    const [after] = await h.db.sql`select (select count(*)::int from sessions) as sessions, (select count(*)::int from sign_in_codes) as codes`;
    expect(after).toEqual({ sessions: before[0]!.sessions - 1, codes: 0 });
    expect((await h.send('GET', '/dashboard/api/me', { cookie: live })).status).toBe(200);
    expect(await sweepExpiredSignIns(h.db.sql)).toEqual({ sessions: 0, codes: 0 });
  });
});

describe('Secure from PUBLIC_URL', () => {
  const s = useDashboardHarness({ PUBLIC_URL: 'https://ams.example.com' });
  test('the cookie is Secure when the public address is https', async () => {
    await s.invite('lin@example.com', 'lin');
    await s.send('POST', '/dashboard/api/sign-in/code', { body: { email: 'lin@example.com' } });
    const res = await s.send('POST', '/dashboard/api/sign-in/verify', {
      body: { email: 'lin@example.com', code: s.lastCode('lin@example.com') },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('set-cookie')).toContain('; Secure; HttpOnly;');
  });
});
