import { beforeAll, describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { useDashboardHarness } from './support/dashboard';
import { POSTS_AT_BOUNDS, POSTS_PAST_BOUNDS } from './support/emoji';

const h = useDashboardHarness();
const sha256 = (text: string) => createHash('sha256').update(text).digest();
// U+1F600, one character of two UTF-16 code units.
const ZERO_ID = '00000000-0000-7000-8000-000000000000';

let cookie: string;
let alice: { username: string; key: string };
let bob: { username: string; key: string };
let carol: { username: string; key: string };

beforeAll(async () => {
  await h.invite('ada@example.com', 'ada');
  cookie = await h.signIn('ada@example.com');
  alice = await h.agent('alice');
  bob = await h.agent('bob', { webhookUrl: 'http://127.0.0.1:9/hook' });
  carol = await h.agent('carol');
});

const as = (method: string, path: string, body?: unknown) => h.send(method, `/dashboard/api${path}`, { cookie, body });

async function openThread(title: string, participants = ['bob', 'carol']) {
  const res = await h.call('POST', '/api/threads', { key: alice.key, body: { title, participantUsernames: participants } });
  return res.body.data.id as string;
}

// Every route of the dashboard API, for the refusals that apply to all of them.
const ROUTES: [string, string][] = [
  ['POST', '/sign-out'],
  ['GET', '/me'],
  ['GET', '/agents'],
  ['POST', '/agents'],
  ['POST', '/agents/alice/archive'],
  ['POST', '/agents/alice/unarchive'],
  ['PUT', '/agents/alice/webhook'],
  ['DELETE', '/agents/alice/webhook'],
  ['GET', '/agents/bob/webhook/secret'],
  ['POST', '/agents/bob/webhook/rotate-secret'],
  ['GET', '/attention'],
  ['GET', '/threads'],
  ['GET', `/threads/${ZERO_ID}`],
  ['GET', `/threads/${ZERO_ID}/messages`],
  ['DELETE', `/threads/${ZERO_ID}/participants/bob`],
  ['POST', `/threads/${ZERO_ID}/confirm-close`],
  ['POST', `/threads/${ZERO_ID}/decline-close`],
  ['POST', `/threads/${ZERO_ID}/messages`],
  ['GET', '/deliveries'],
  ['GET', '/deliveries/events'],
  ['GET', '/deliveries/failed-in-view'],
  ['POST', '/deliveries/resend-failed'],
  ['POST', `/deliveries/${ZERO_ID}/resend`],
  ['GET', '/audit'],
];

describe('refusals', () => {
  test('an agent key gets 401 on every dashboard route, with or without a session', async () => {
    for (const [method, path] of [...ROUTES, ['POST', '/sign-in/code'], ['POST', '/sign-in/verify']] as [string, string][]) {
      for (const withSession of [false, true]) {
        const res = await h.send(method, `/dashboard/api${path}`, {
          cookie: withSession ? cookie : null,
          headers: { authorization: `Bearer ${alice.key}` },
          body: { username: 'x' },
        });
        expect([method, path, res.status, res.body]).toEqual([
          method,
          path,
          401,
          { success: false, error: 'Agent keys are not accepted on the dashboard; a person signs in with an emailed code.', code: 'agent_key' },
        ]);
      }
    }
  });

  test('a NUL character in a path segment is a 400, not a server fault', async () => {
    const res = await h.send('POST', '/dashboard/api/agents/a%00b/archive', { cookie });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ success: false, error: 'The request URL must not contain the NUL character (%00).', code: 'invalid' });
  });

  test('an agent key gets 401 on the dashboard pages and assets too', async () => {
    for (const page of ['', '/', '/sign-in', '/overview', '/deliveries', '/threads', '/agents', '/assets/dashboard.js', '/assets/dashboard.css']) {
      for (const withSession of [false, true]) {
        const res = await h.send('GET', `/dashboard${page}`, {
          cookie: withSession ? cookie : null,
          headers: { authorization: `Bearer ${alice.key}` },
        });
        expect([page, res.status, res.body]).toEqual([
          page,
          401,
          { success: false, error: 'Agent keys are not accepted on the dashboard; a person signs in with an emailed code.', code: 'agent_key' },
        ]);
      }
    }
    expect((await h.send('GET', '/dashboard/sign-in')).status).toBe(200);
  });

  test('without a session every route but sign-in gets 401, before its body is read', async () => {
    for (const [method, path] of ROUTES) {
      const res = await h.send(method, `/dashboard/api${path}`, { headers: { 'content-type': 'application/json' }, body: undefined });
      expect([method, path, res.status, res.body]).toEqual([
        method,
        path,
        401,
        { success: false, error: 'Sign in first: there is no session, or it has expired.', code: 'no_session' },
      ]);
    }
    const garbage = await h.dash.handle(
      new Request('http://localhost/dashboard/api/agents', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-requested-with': 'fetch', cookie: 'ams_session=forged' },
        body: '{not json',
      }),
    );
    expect(garbage.status).toBe(401);
  });

  test('a state change without the dashboard header, from another origin or another site is refused (403) and changes nothing', async () => {
    const attempts: { csrf: boolean; headers: Record<string, string> }[] = [
      { csrf: false, headers: {} },
      { csrf: true, headers: { origin: 'https://evil.example' } },
      { csrf: true, headers: { 'sec-fetch-site': 'cross-site' } },
      { csrf: true, headers: { 'sec-fetch-site': 'same-site' } },
    ];
    for (const { csrf, headers } of attempts) {
      const res = await h.send('POST', '/dashboard/api/agents/alice/archive', { cookie, csrf, headers });
      expect(res.status).toBe(403);
      expect(res.body.success).toBe(false);
    }
    const plain = await h.send('POST', '/dashboard/api/agents/alice/archive', { cookie, csrf: false });
    expect(plain.body.error).toBe(
      'Cross-site request refused: dashboard requests that change state must send x-requested-with: fetch.',
    );
    const [row] = await h.db.sql`select archived_at from agents where username = 'alice'`;
    expect(row!.archived_at).toBeNull();
    const signIn = await h.send('POST', '/dashboard/api/sign-in/code', { csrf: false, body: { email: 'ada@example.com' } });
    expect(signIn.status).toBe(403);
    const sameOrigin = await h.send('POST', '/dashboard/api/agents/alice/unarchive', {
      cookie,
      headers: { origin: 'http://localhost', 'sec-fetch-site': 'same-origin' },
    });
    expect(sameOrigin.status).toBe(200);
  });

  test('the dashboard API is not in the public OpenAPI document', async () => {
    const doc = await h.call('GET', '/openapi/json');
    expect(Object.keys(doc.body.paths).filter((p) => p.startsWith('/dashboard'))).toEqual([]);
  });
});

describe('agents', () => {
  test("an agent's keys: listed without the key, created once shown, revoked; refusals in the envelope", async () => {
    const listed = await as('GET', '/agents/carol/keys');
    expect(listed.body).toEqual({
      success: true,
      data: [{ id: expect.any(String), name: 'initial', prefix: carol.key.slice(0, 12), createdAt: expect.any(String), lastUsedAt: null, expiresAt: null }],
    });
    const made = await as('POST', '/agents/carol/keys', { name: 'desk', expiresAt: '2031-01-01T00:00:00+02:00' });
    expect([made.status, made.body.data.expiresAt, made.body.data.apiKey]).toEqual([201, '2030-12-31T22:00:00.000Z', expect.stringMatching(/^agt_/)]);
    for (const [method, path, body, status, error] of [
      ['GET', '/agents/nobody/keys', undefined, 404, 'No agent named nobody.'],
      ['POST', '/agents/nobody/keys', { name: 'x' }, 404, 'No agent named nobody.'],
      ['POST', '/agents/carol/keys', { name: 'x', expiresAt: 'soon' }, 400, 'expiresAt must be a date and time with its offset, such as 2027-02-01T00:00:00Z'],
      ['DELETE', `/agents/carol/keys/${ZERO_ID}`, undefined, 404, 'No such key for this agent.'],
      ['DELETE', `/agents/alice/keys/${made.body.data.id}`, undefined, 404, 'No such key for this agent.'],
    ] as const) {
      const res = await as(method, path, body);
      expect([res.status, res.body.success, res.body.error]).toEqual([status, false, error]);
    }
    const revoked = await as('DELETE', `/agents/carol/keys/${listed.body.data[0].id}`);
    expect([revoked.status, revoked.body.data.name]).toEqual([200, 'initial']);
    const last = await as('DELETE', `/agents/carol/keys/${made.body.data.id}`);
    expect(last.status).toBe(409);
    carol = { ...carol, key: made.body.data.apiKey };
    const trail = await h.db.sql`select actor, action from audit_events where subject = 'carol' and action like 'agent.key.%' order by at, id`;
    expect(trail.map((r) => `${r.actor} ${r.action}`)).toEqual(['ada agent.key.create', 'ada agent.key.revoke']);
  });

  test('register: the key is shown once and stored only as its hash', async () => {
    const res = await as('POST', '/agents', { username: 'drafter' });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body.data)).toEqual(['username', 'apiKey']);
    expect(res.body.data.apiKey).toMatch(/^agt_/);
    const [row] = await h.db.sql`select key_hash, webhook_url, signing_secret from agents where username = 'drafter'`;
    expect(Buffer.from(row!.key_hash)).toEqual(sha256(res.body.data.apiKey));
    expect([row!.webhook_url, row!.signing_secret]).toEqual([null, null]);
    const list = await as('GET', '/agents');
    const listed = list.body.data.items.find((a: any) => a.username === 'drafter');
    expect(listed).toEqual({
      id: expect.any(String), username: 'drafter', archived: false, cardListed: false, webhookUrl: null, webhookSetAt: null, previousSecretExpiresAt: null, createdAt: expect.any(String), connections: [],
      health: null, lastTestEvent: null, cursor: listed.id, profile: { displayName: null, description: null, tags: [] }, presence: { online: false, lastSeenAt: null },
    });
    expect(JSON.stringify(list.body)).not.toContain('agt_');
  });

  test('register with a webhook mints its secret; a taken name is 409; a bad name or URL is 400', async () => {
    const res = await as('POST', '/agents', { username: 'hooked', webhookUrl: 'http://127.0.0.1:9/in' });
    expect(res.status).toBe(201);
    expect(res.body.data).toEqual({ username: 'hooked', apiKey: expect.any(String), webhookUrl: 'http://127.0.0.1:9/in', signingSecret: expect.stringMatching(/^whsec_/) });
    const [row] = await h.db.sql`select signing_secret from agents where username = 'hooked'`;
    expect(row!.signing_secret).toBe(res.body.data.signingSecret);
    expect(await as('POST', '/agents', { username: 'hooked' })).toMatchObject({ status: 409, body: { success: false, error: 'An agent named hooked already exists.' } });
    expect(await as('POST', '/agents', { username: 'Bad Name' })).toMatchObject({ status: 400, body: { success: false } });
    expect(await as('POST', '/agents', { username: 'fine', webhookUrl: 'ftp://x' })).toMatchObject({
      status: 400,
      body: { success: false, error: 'webhookUrl must use https://' },
    });
  });

  test('a webhook URL with a control character, or text the database would not keep as given, is a 400 naming the field, and nothing is saved', async () => {
    const unpaired = 'must not contain an unpaired surrogate (U+D800 to U+DFFF), which is not valid Unicode';
    const controls = 'webhookUrl must not contain spaces or control characters such as a newline';
    // JSON.stringify sends each of these as its JSON escape, as any client would.
    for (const [body, error, field] of [
      [{ username: 'lined', webhookUrl: 'http://127.0.0.1:9/in\n' }, controls, 'webhookUrl'],
      [{ username: 'lined', webhookUrl: 'http://127.0.0.1:9/in\r\nX-Injected: 1' }, controls, 'webhookUrl'],
      [{ username: 'lined', webhookUrl: 'http://127.0.0.1:9/in\u0000' }, 'webhookUrl must not contain the NUL character (U+0000)', 'webhookUrl'],
      [{ username: 'lined', webhookUrl: 'http://127.0.0.1:9/\ud800' }, `webhookUrl ${unpaired}`, 'webhookUrl'],
      [{ username: '\ud800' }, `username ${unpaired}`, 'username'],
    ] as const) {
      const res = await as('POST', '/agents', body);
      expect([body, res.status, res.body]).toEqual([body, 400, { success: false, error, code: 'invalid', field }]);
    }
    const put = await as('PUT', '/agents/carol/webhook', { webhookUrl: 'http://127.0.0.1:9/carol\n' });
    expect([put.status, put.body]).toEqual([400, { success: false, error: controls, code: 'invalid', field: 'webhookUrl' }]);
    const [lined] = await h.db.sql`select count(*)::int as n from agents where username = 'lined' or username like '%' || chr(65533) || '%'`;
    expect(lined!.n).toBe(0);
    const [carolRow] = await h.db.sql`select webhook_url from agents where username = 'carol'`;
    expect(carolRow!.webhook_url).toBeNull();
  });

  test('archive revokes the key; unarchive restores it', async () => {
    const res = await as('POST', '/agents/carol/archive');
    expect(res.body).toEqual({ success: true, data: { username: 'carol', archived: true } });
    const [row] = await h.db.sql`select archived_at from agents where username = 'carol'`;
    expect(row!.archived_at).toBeInstanceOf(Date);
    expect((await h.call('GET', '/api/threads', { key: carol.key })).status).toBe(401);
    expect((await as('POST', '/agents/carol/unarchive')).body).toEqual({ success: true, data: { username: 'carol', archived: false } });
    expect((await h.db.sql`select archived_at from agents where username = 'carol'`)[0]!.archived_at).toBeNull();
    expect((await h.call('GET', '/api/threads', { key: carol.key })).status).toBe(200);
    expect(await as('POST', '/agents/nobody/archive')).toMatchObject({ status: 404, body: { error: 'No agent named nobody.' } });
  });

  test("list an agent's A2A card publicly and stop; the list shows the choice; a bad value or name is refused", async () => {
    const listed = await as('PUT', '/agents/carol/a2a-card', { listed: true });
    expect([listed.status, listed.body]).toEqual([200, { success: true, data: { username: 'carol', listed: true } }]);
    const agents = await as('GET', '/agents?q=carol');
    expect(agents.body.data.items.map((a: { username: string; cardListed: boolean }) => [a.username, a.cardListed])).toEqual([['carol', true]]);
    expect((await as('PUT', '/agents/carol/a2a-card', { listed: false })).body.data).toEqual({ username: 'carol', listed: false });
    expect((await h.db.sql`select a2a_card_listed from agents where username = 'carol'`)[0]!.a2a_card_listed).toBe(false);
    expect(await as('PUT', '/agents/carol/a2a-card', { listed: 'yes' })).toMatchObject({ status: 400, body: { error: 'listed must be true or false' } });
    expect(await as('PUT', '/agents/nobody/a2a-card', { listed: true })).toMatchObject({ status: 404, body: { error: 'No agent named nobody.' } });
  });

  test('add a webhook, reveal its secret, remove it; re-adding mints a different secret', async () => {
    const added = await as('PUT', '/agents/alice/webhook', { webhookUrl: 'http://127.0.0.1:9/alice' });
    expect(added.status).toBe(200);
    expect(added.body.data).toEqual({ username: 'alice', webhookUrl: 'http://127.0.0.1:9/alice', signingSecret: expect.stringMatching(/^whsec_/) });
    const shown = await as('GET', '/agents/alice/webhook/secret');
    expect(shown.body).toEqual({ success: true, data: added.body.data });
    expect(shown.headers.get('cache-control')).toBe('no-store');

    const removed = await as('DELETE', '/agents/alice/webhook');
    expect(removed.body).toEqual({ success: true, data: { username: 'alice', webhookUrl: null } });
    const [row] = await h.db.sql`select webhook_url, signing_secret, webhook_set_at from agents where username = 'alice'`;
    expect(row).toEqual({ webhook_url: null, signing_secret: null, webhook_set_at: null });
    expect(await as('GET', '/agents/alice/webhook/secret')).toMatchObject({
      status: 404,
      body: { success: false, error: 'alice has no webhook, so it has no signing secret.' },
    });

    const again = await as('PUT', '/agents/alice/webhook', { webhookUrl: 'http://127.0.0.1:9/alice' });
    expect(again.body.data.signingSecret).not.toBe(added.body.data.signingSecret);
    await as('DELETE', '/agents/alice/webhook');
    expect(await as('PUT', '/agents/alice/webhook', {})).toMatchObject({ status: 400, body: { error: 'webhookUrl must be a non-empty string' } });
    expect(await as('PUT', '/agents/ghost/webhook', { webhookUrl: 'http://127.0.0.1:9/g' })).toMatchObject({ status: 404 });
  });
});

describe('lists a page at a time', () => {
  test('agents and threads, newest first, by key: the cursor of the next page until the last, and a refresh down to an id', async () => {
    for (let i = 0; i < 5; i++) await as('POST', '/agents', { username: `paged-${i}` });
    const opened: string[] = [];
    for (let i = 0; i < 3; i++) opened.push(await openThread(`Paged ${i}`));
    const first = await as('GET', '/agents?limit=2');
    expect(first.body.data.items.map((a: any) => a.username)).toEqual(['paged-4', 'paged-3']);
    expect(first.body.data.next).toBe(first.body.data.items[1].id);
    const second = await as('GET', `/agents?limit=2&after=${first.body.data.next}`);
    expect(second.body.data.items.map((a: any) => a.username)).toEqual(['paged-2', 'paged-1']);
    // What a live page reads to refresh the two pages it shows: everything down to the oldest one.
    const refreshed = await as('GET', `/agents?since=${second.body.data.next}&limit=500`);
    expect(refreshed.body.data.items.map((a: any) => a.username)).toEqual(['paged-4', 'paged-3', 'paged-2', 'paged-1']);
    const [count] = await h.db.sql`select count(*)::int as n from agents`;
    const all = await as('GET', '/agents?limit=500');
    expect([all.body.data.items.length, all.body.data.next]).toEqual([count!.n, null]);
    expect((await as('GET', '/agents?q=GED-3')).body.data.items.map((a: any) => a.username)).toEqual(['paged-3']);
    // The search's own wildcards are taken literally.
    expect((await as('GET', '/agents?q=paged_%25')).body.data.items).toEqual([]);
    const threads = await as('GET', '/threads?limit=2');
    expect(threads.body.data.items.map((t: any) => t.id)).toEqual([opened[2], opened[1]]);
    const rest = await as('GET', `/threads?limit=2&after=${threads.body.data.next}`);
    expect(rest.body.data.items[0].id).toBe(opened[0]);
    expect((await as('GET', '/threads?q=paged 1')).body.data.items.map((t: any) => t.id)).toEqual([opened[1]]);
    // A cursor that is not one from the list is refused, with a sentence naming it.
    expect(await as('GET', '/threads?after=not-an-id')).toMatchObject({ status: 400, body: { success: false, error: 'after must be a cursor taken from the list' } });
    expect(await as('GET', '/agents?since=nobody')).toMatchObject({ status: 400, body: { success: false, error: 'since must be an id taken from the list' } });
    expect(await as('GET', '/threads?state=shut')).toMatchObject({ status: 400, body: { error: 'state must be one of open, close-pending, closed' } });
    expect(await as('GET', `/agents?q=${'x'.repeat(201)}`)).toMatchObject({ status: 400, body: { error: 'q must be at most 200 characters' } });
  });
});

describe('threads', () => {
  test('lists every thread with participants and state, closed ones included', async () => {
    const id = await openThread('Listed');
    await h.db.sql`update threads set state = 'closed' where id = ${id}`;
    const res = await as('GET', '/threads');
    const thread = res.body.data.items.find((t: any) => t.id === id);
    const [stored] = await h.db.sql`select created_at, (extract(epoch from last_activity_at) * 1000000)::bigint::text as micros from threads where id = ${id}`;
    expect(thread).toEqual({
      id,
      title: 'Listed',
      goal: null,
      state: 'closed',
      openedBy: 'alice',
      createdAt: stored!.created_at.toISOString(),
      participants: [{ username: 'alice' }, { username: 'bob' }, { username: 'carol' }],
      // Nothing happened since it opened (the state was set behind the service's back).
      lastActivityAt: stored!.created_at.toISOString(),
      cursor: `${stored!.micros}_${id}`,
    });
  });

  test('removing a participant: it loses the thread (404) and its inbox no longer lists it', async () => {
    const id = await openThread('Removal');
    await h.call('POST', `/api/threads/${id}/messages`, { key: alice.key, body: { content: 'before removal' } });
    expect((await h.call('GET', '/api/deliveries', { key: carol.key })).body.data.some((e: any) => e.threadId === id)).toBe(true);

    const res = await as('DELETE', `/threads/${id}/participants/carol`);
    expect(res.status).toBe(200);
    expect(res.body.data.participants).toEqual([{ username: 'alice' }, { username: 'bob' }]);
    const rows = await h.db.sql`select a.username from participants p join agents a on a.id = p.agent_id where p.thread_id = ${id} order by 1`;
    expect(rows.map((r) => r.username)).toEqual(['alice', 'bob']);
    expect((await h.call('GET', `/api/threads/${id}`, { key: carol.key })).status).toBe(404);
    expect((await h.call('GET', '/api/deliveries', { key: carol.key })).body.data.some((e: any) => e.threadId === id)).toBe(false);

    expect(await as('DELETE', `/threads/${id}/participants/carol`)).toMatchObject({
      status: 404,
      body: { success: false, error: 'carol is not a participant of this thread.' },
    });
    expect(await as('DELETE', `/threads/${ZERO_ID}/participants/bob`)).toMatchObject({ status: 404, body: { error: 'No such thread.' } });
    expect(await as('DELETE', `/threads/not-an-id/participants/bob`)).toMatchObject({ status: 404 });
  });

  test('confirm and decline a close request', async () => {
    const confirmed = await openThread('To close');
    await h.call('POST', `/api/threads/${confirmed}/close`, { key: alice.key });
    expect((await as('POST', `/threads/${confirmed}/confirm-close`)).body).toEqual({ success: true, data: { id: confirmed, state: 'closed' } });
    const [closed] = await h.db.sql`select state, closed_at from threads where id = ${confirmed}`;
    expect(closed!.state).toBe('closed');
    expect(closed!.closed_at).toBeInstanceOf(Date);
    expect((await h.call('GET', `/api/threads/${confirmed}`, { key: bob.key })).status).toBe(404);

    const declined = await openThread('To keep');
    await h.call('POST', `/api/threads/${declined}/close`, { key: alice.key });
    expect((await as('POST', `/threads/${declined}/decline-close`)).body).toEqual({ success: true, data: { id: declined, state: 'open' } });
    const [open] = await h.db.sql`select state, close_requested_at from threads where id = ${declined}`;
    expect(open).toEqual({ state: 'open', close_requested_at: null });
    expect(await as('POST', `/threads/${declined}/decline-close`)).toMatchObject({
      status: 400,
      body: { success: false, error: 'The thread has no pending close request (it is open).' },
    });
    expect(await as('POST', `/threads/${ZERO_ID}/confirm-close`)).toMatchObject({ status: 404 });
  });

  test('a person posts as themselves: sender is their username, every active participant receives it', async () => {
    const id = await openThread('Posting');
    const res = await as('POST', `/threads/${id}/messages`, { content: 'Hello from a person' });
    expect(res.status).toBe(201);
    expect(res.body.data).toEqual({ id: expect.any(String), threadId: id, createdAt: expect.any(String), recipients: 3 });
    const [message] = await h.db.sql`select sender, sender_agent_id, content from messages where id = ${res.body.data.id}`;
    expect(message).toEqual({ sender: 'ada', sender_agent_id: null, content: 'Hello from a person' });
    const recipients = await h.db.sql<{ username: string; step: string; webhook: boolean }[]>`
      select a.username, d.step, d.webhook from deliveries d join agents a on a.id = d.recipient_id
      where d.message_id = ${res.body.data.id} order by 1`;
    expect([...recipients]).toEqual([
      { username: 'alice', step: 'accepted', webhook: false },
      { username: 'bob', step: 'accepted', webhook: true },
      { username: 'carol', step: 'accepted', webhook: false },
    ]);
    const inbox = await h.call('GET', '/api/deliveries', { key: carol.key });
    expect(inbox.body.data.find((e: any) => e.messageId === res.body.data.id)).toMatchObject({ sender: 'ada', summary: 'Hello from a person' });
    expect(await as('POST', `/threads/${id}/messages`, { content: '' })).toMatchObject({ status: 400, body: { error: 'content must not be empty' } });
    expect(await as('POST', `/threads/${ZERO_ID}/messages`, { content: 'x' })).toMatchObject({ status: 404 });
  });

  test("a person's post counts lengths in code points: every bound holds with emoji, two UTF-16 units each", async () => {
    const id = await openThread('Emoji');
    for (const body of POSTS_AT_BOUNDS) {
      const res = await as('POST', `/threads/${id}/messages`, body);
      expect(res.status).toBe(201);
      const [stored] = await h.db.sql`select content, summary from messages where id = ${res.body.data.id}`;
      expect(stored).toEqual({ content: body.content, summary: body.summary ?? null });
    }
    for (const [body, error, field] of POSTS_PAST_BOUNDS) {
      const res = await as('POST', `/threads/${id}/messages`, body);
      expect([body, res.status, res.body]).toEqual([body, 400, { success: false, error, code: 'invalid', field }]);
    }
    const [messages] = await h.db.sql`select count(*)::int as n from messages where thread_id = ${id}`;
    expect(messages!.n).toBe(2);
  });

  test("an unpaired surrogate in a person's post is a 400 naming the field, and nothing is stored", async () => {
    const id = await openThread('Half characters');
    const unpaired = 'must not contain an unpaired surrogate (U+D800 to U+DFFF), which is not valid Unicode';
    for (const [body, error, field] of [
      [{ content: '\ud800' }, `content ${unpaired}`, 'content'],
      [{ content: 'fine', summary: '\udfff' }, `summary ${unpaired}`, 'summary'],
    ] as const) {
      const res = await as('POST', `/threads/${id}/messages`, body);
      expect([body, res.status, res.body]).toEqual([body, 400, { success: false, error, code: 'invalid', field }]);
    }
    const [messages] = await h.db.sql`select count(*)::int as n from messages where thread_id = ${id}`;
    expect(messages!.n).toBe(0);
  });
});

describe('threads by last activity', () => {
  const order = async (q: string) => ((await as('GET', `/threads?q=${encodeURIComponent(q)}`)).body.data.items as any[]).map((t) => t.id);
  const activity = async (ids: string[]) =>
    (await h.db.sql`select last_activity_at from threads t join unnest(${ids}::uuid[]) with ordinality as x(id, n) on x.id = t.id order by x.n`).map((r) => r.last_activity_at);

  test('a new message, a close request and a decision move a thread to the top; nothing else does', async () => {
    const [a, b, c] = [await openThread('Activity a'), await openThread('Activity b'), await openThread('Activity c')];
    // Hours apart, so that the order is the one set here.
    await h.db.sql`update threads t set last_activity_at = now() - make_interval(hours => x.h)
                   from unnest(${[a, b, c]}::uuid[], ${[3, 2, 1]}::int[]) as x(id, h) where t.id = x.id`;
    expect(await order('Activity')).toEqual([c, b, a]);

    const posted = await h.call('POST', `/api/threads/${a}/messages`, { key: bob.key, body: { content: 'moving up' } });
    expect(posted.status).toBe(201);
    const listed = (await as('GET', '/threads?q=Activity')).body.data.items;
    expect(listed.map((t: any) => t.id)).toEqual([a, c, b]);
    expect(listed[0].lastActivityAt).toBe(posted.body.data.createdAt);

    expect((await h.call('POST', `/api/threads/${b}/close`, { key: alice.key })).status).toBe(200);
    expect(await order('Activity')).toEqual([b, a, c]);
    const [requested] = await h.db.sql`select close_requested_at, last_activity_at from threads where id = ${b}`;
    expect(requested!.last_activity_at).toEqual(requested!.close_requested_at);

    // Not activity: asking again, a post refused while the close is pending, a participant removed
    // or added.
    const before = await activity([a, b, c]);
    expect((await h.call('POST', `/api/threads/${b}/close`, { key: alice.key })).status).toBe(200);
    expect((await h.call('POST', `/api/threads/${b}/messages`, { key: alice.key, body: { content: 'refused' } })).status).toBe(400);
    expect((await as('DELETE', `/threads/${c}/participants/carol`)).status).toBe(200);
    expect((await h.call('POST', `/api/threads/${c}/participants`, { key: alice.key, body: { username: 'carol' } })).status).toBe(200);
    expect(await activity([a, b, c])).toEqual(before);
    expect(await order('Activity')).toEqual([b, a, c]);

    // A decline and a close are activity too.
    expect((await h.call('POST', `/api/threads/${c}/messages`, { key: alice.key, body: { content: 'c again' } })).status).toBe(201);
    expect(await order('Activity')).toEqual([c, b, a]);
    expect((await as('POST', `/threads/${b}/decline-close`)).status).toBe(200);
    expect(await order('Activity')).toEqual([b, c, a]);
    expect((await h.call('POST', `/api/threads/${a}/close`, { key: alice.key })).status).toBe(200);
    expect(await order('Activity')).toEqual([a, b, c]);
    // As if the request had waited an hour for its decision.
    await h.db.sql`update threads set last_activity_at = now() - interval '1 hour' where id = ${a}`;
    expect(await order('Activity')).toEqual([b, c, a]);
    expect((await as('POST', `/threads/${a}/confirm-close`)).status).toBe(200);
    expect(await order('Activity')).toEqual([a, b, c]);
    const [closed] = await h.db.sql`select closed_at, last_activity_at from threads where id = ${a}`;
    expect(closed!.last_activity_at).toEqual(closed!.closed_at);
  });

  test('after and since page by (last activity, id): across equal times, and as a thread moves up, each thread is read exactly once', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push(await openThread(`Tied ${i}`));
    // Four share one time to the microsecond, so that only their ids tell them apart.
    await h.db.sql`update threads set last_activity_at = '2001-01-01 00:00:00.123456+00' where id = any(${ids.slice(0, 4)}::uuid[])`;
    await h.db.sql`update threads set last_activity_at = '2001-01-01 00:00:00.123455+00' where id = ${ids[4]!}`;
    await h.db.sql`update threads set last_activity_at = '2000-01-01 00:00:00+00' where id = ${ids[5]!}`;
    const expected = [3, 2, 1, 0, 4, 5].map((i) => ids[i]!);
    const read = async (query: string) => (await as('GET', `/threads?q=Tied&${query}`)).body.data as { items: any[]; next: string | null };

    const pages: string[][] = [];
    let next: string | null = '';
    while (next !== null) {
      const page: { items: any[]; next: string | null } = await read(`limit=2${next ? `&after=${next}` : ''}`);
      pages.push(page.items.map((t) => t.id));
      next = page.next;
      if (next !== null) expect(next).toBe(page.items.at(-1).cursor);
    }
    expect(pages).toEqual([expected.slice(0, 2), expected.slice(2, 4), expected.slice(4)]);
    // `since` is inclusive down to the item it names, ties included.
    const third = (await read('limit=3')).items[2];
    expect((await read(`since=${third.cursor}`)).items.map((t) => t.id)).toEqual(expected.slice(0, 3));

    // A thread still below the first page moves to the top: the next pages leave it out, and a
    // refresh down to the oldest item shown brings it, once.
    const first = await read('limit=2');
    await h.call('POST', `/api/threads/${ids[0]}/messages`, { key: alice.key, body: { content: 'up' } });
    const second = await read(`limit=2&after=${first.next}`);
    const last = await read(`limit=2&after=${second.next}`);
    expect([...first.items, ...second.items, ...last.items].map((t) => t.id)).toEqual([ids[3], ids[2], ids[1], ids[4], ids[5]]);
    expect(last.next).toBeNull();
    const refreshed = await read(`since=${last.items.at(-1).cursor}&limit=500`);
    expect(refreshed.items.map((t) => t.id)).toEqual([ids[0], ids[3], ids[2], ids[1], ids[4], ids[5]]);
  });

  test('a cursor that is not one the list answered is a 400 naming it, in the envelope', async () => {
    const [thread] = (await as('GET', '/threads?limit=1')).body.data.items;
    for (const [name, value] of [
      ['after', 'not-a-cursor'],
      // An id alone: the form the list took before it was ordered by activity.
      ['since', thread.id],
      ['after', `${thread.cursor}x`],
      ['since', `12345678901234567_${thread.id}`],
      ['after', `-1_${thread.id}`],
      ['since', `1_${'z'.repeat(36)}`],
      ['after', `1_${thread.id.replaceAll('-', '')}0000`],
    ]) {
      const res = await as('GET', `/threads?${name}=${encodeURIComponent(value!)}`);
      expect([value, res.status, res.body]).toEqual([value, 400, { success: false, error: `${name} must be a cursor taken from the list`, code: 'invalid' }]);
    }
    expect((await as('GET', `/threads?after=${thread.cursor}`)).status).toBe(200);
  });
});

describe('deliveries', () => {
  let threadId: string;
  let messageId: string;
  const deliveryOf = async (username: string, message = messageId) =>
    (await h.db.sql`select d.id from deliveries d join agents a on a.id = d.recipient_id where d.message_id = ${message} and a.username = ${username}`)[0]!.id as string;
  const ids = (res: { body: any }) => res.body.data.items.map((d: any) => d.id);

  beforeAll(async () => {
    threadId = await openThread('Progress');
    const posted = await h.call('POST', `/api/threads/${threadId}/messages`, { key: alice.key, body: { content: 'Progress check\nsecond line' } });
    messageId = posted.body.data.id;
  });

  test('one row per delivery, newest first, with its step, times, doorbell payload and attempt log', async () => {
    const bobDelivery = await deliveryOf('bob');
    await h.db.sql`
      insert into delivery_attempts (delivery_id, publish, attempt, duration_ms, status, error)
      values (${bobDelivery}, 1, 1, 120, 503, 'HTTP 503'), (${bobDelivery}, 1, 2, 35, 200, null)`;
    await h.db.sql`update deliveries set step = 'notified', notified_at = now() where id = ${bobDelivery}`;
    const res = await as('GET', `/deliveries?thread=${threadId}`);
    expect(res.status).toBe(200);
    expect(res.body.data.next).toBeNull();
    const rows = res.body.data.items;
    expect(rows.map((d: any) => [d.recipient, d.step, d.stalled, d.webhook])).toEqual([
      ['carol', 'accepted', false, false],
      ['bob', 'notified', false, true],
    ]);
    const bob = rows[1];
    expect(bob).toMatchObject({ messageId, threadId, thread: 'Progress', sender: 'alice', summary: 'Progress check' });
    const none = { resend: 0, responseBody: null, requestHeaders: null, interrupted: false, url: null, responseHeaders: null };
    expect(bob.attempts).toEqual([
      { attemptedAt: expect.any(String), publish: 1, attempt: 1, status: 503, durationMs: 120, error: 'HTTP 503', ...none },
      { attemptedAt: expect.any(String), publish: 1, attempt: 2, status: 200, durationMs: 35, error: null, ...none },
    ]);
    expect(bob).toMatchObject({ retrying: false, nextAttemptAt: null, lastError: null });
    expect(bob.notifiedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    // It turns Stalled STALLED_AFTER_MS after it was notified, unless reported first.
    expect(Date.parse(bob.stallsAt) - Date.parse(bob.notifiedAt)).toBe(h.config.STALLED_AFTER_MS);
    expect(JSON.parse(bob.payload)).toEqual({
      event: 'message.created',
      data: { deliveryId: bobDelivery, messageId, threadId, threadTitle: 'Progress', sender: 'alice', summary: 'Progress check' },
    });
    expect(rows[0]).toMatchObject({ payload: null, stallsAt: null });
  });

  test('filters: a state, a recipient, a thread, a search by id or text, a time range; each refusal names its value', async () => {
    const bobDelivery = await deliveryOf('bob');
    const carolDelivery = await deliveryOf('carol');
    await h.db.sql`update deliveries set notified_at = now() - interval '1 hour' where id = ${bobDelivery}`;
    await h.db.sql`update deliveries set step = 'failed', failed_step = 'accepted', error = 'Handler answered 401' where id = ${carolDelivery}`;

    expect(ids(await as('GET', '/deliveries?state=stalled'))).toEqual([bobDelivery]);
    const failed = await as('GET', '/deliveries?state=failed');
    expect(failed.body.data.items.map((d: any) => [d.id, d.failedStep, d.error])).toEqual([[carolDelivery, 'accepted', 'Handler answered 401']]);
    expect(ids(await as('GET', `/deliveries?agent=bob&thread=${threadId}`))).toEqual([bobDelivery]);
    expect(ids(await as('GET', '/deliveries?agent=nobody'))).toEqual([]);
    // By delivery id, by message id, by thread id; by text in the body, the title or a name.
    expect(ids(await as('GET', `/deliveries?q=${bobDelivery}`))).toEqual([bobDelivery]);
    expect(ids(await as('GET', `/deliveries?q=${messageId}`))).toEqual([carolDelivery, bobDelivery]);
    expect(ids(await as('GET', `/deliveries?q=${threadId}&agent=carol`))).toEqual([carolDelivery]);
    expect(ids(await as('GET', '/deliveries?q=SECOND LINE'))).toEqual([carolDelivery, bobDelivery]);
    expect(ids(await as('GET', `/deliveries?q=progress&thread=${threadId}&agent=carol`))).toEqual([carolDelivery]);
    expect(ids(await as('GET', '/deliveries?q=no such words anywhere'))).toEqual([]);
    // Text is found through the agents' full-text index: whole words, in its syntax; names by any part.
    expect(ids(await as('GET', `/deliveries?q=${encodeURIComponent('"check second" -nothing')}`))).toEqual([carolDelivery, bobDelivery]);
    expect(ids(await as('GET', `/deliveries?q=${encodeURIComponent('"second check"')}`))).toEqual([]);
    expect(ids(await as('GET', '/deliveries?q=secon'))).toEqual([]);
    expect(ids(await as('GET', `/deliveries?q=aro&thread=${threadId}`))).toEqual([carolDelivery]);
    expect(ids(await as('GET', '/deliveries?q=-progress'))).toEqual([]);
    const [{ created }] = await h.db.sql`select created_at as created from deliveries where id = ${bobDelivery}` as any;
    const at = (created as Date).getTime();
    const iso = (ms: number) => new Date(ms).toISOString();
    expect(ids(await as('GET', `/deliveries?thread=${threadId}&from=${iso(at - 1000)}&to=${iso(at + 1000)}`))).toEqual([carolDelivery, bobDelivery]);
    expect(ids(await as('GET', `/deliveries?thread=${threadId}&from=${iso(at + 1000)}`))).toEqual([]);
    expect(ids(await as('GET', `/deliveries?thread=${threadId}&to=${iso(at - 1000)}`))).toEqual([]);

    for (const [q, error] of [
      ['state=lost', 'state must be one of failed, retrying, stalled, accepted, notified, delivered, fetched'],
      ['thread=not-an-id', 'thread must be a thread id'],
      ['from=yesterday', 'from must be a date and time such as 2026-11-23T09:30:00Z'],
      ['from=2026-11-23T10:00:00Z&to=2026-11-23T09:00:00Z', 'from must be earlier than to'],
      ['after=7', 'after must be an id taken from the list'],
      [`q=${'x'.repeat(201)}`, 'q must be at most 200 characters'],
    ]) {
      expect([q, await as('GET', `/deliveries?${q}`)]).toMatchObject([q, { status: 400, body: { success: false, error } }]);
    }

    // Newer deliveries that are Notified but not yet stalled do not crowd the stalled one off the page.
    for (const content of ['newer one', 'newer two']) {
      const posted = await h.call('POST', `/api/threads/${threadId}/messages`, { key: alice.key, body: { content } });
      await h.db.sql`update deliveries set step = 'notified', notified_at = now() where message_id = ${posted.body.data.id}`;
    }
    const firstPage = await as('GET', '/deliveries?state=stalled&limit=1');
    expect([ids(firstPage), firstPage.body.data.next]).toEqual([[bobDelivery], null]);
    // Paged by key: the second page starts after the cursor whatever arrived meanwhile.
    const page1 = await as('GET', `/deliveries?thread=${threadId}&limit=3`);
    await h.call('POST', `/api/threads/${threadId}/messages`, { key: alice.key, body: { content: 'newest' } });
    const page2 = await as('GET', `/deliveries?thread=${threadId}&limit=3&after=${page1.body.data.next}`);
    expect([...ids(page1), ...ids(page2)]).toEqual((await h.db.sql`
      select id from deliveries where thread_id = ${threadId} and id <= ${page1.body.data.items[0].id} order by id desc`).map((r) => r.id));
  });

  test('what needs a person is counted for the navigation, by the rules the filters use', async () => {
    const res = await as('GET', '/attention');
    const [row] = await h.db.sql`
      select count(*) filter (where step = 'failed')::int as failed,
             count(*) filter (where step = 'accepted' and next_attempt_at is not null)::int as retrying,
             count(*) filter (where step = 'notified' and delivered_at is null and notified_at < now() - interval '5 minutes')::int as stalled
      from deliveries`;
    const [threads] = await h.db.sql`select count(*) filter (where state = 'close-pending')::int as n from threads`;
    expect(res.body.data).toEqual({ ...row, closeRequests: threads!.n, waiting: 0, paused: 0, nextStallAt: expect.any(String) });
    expect(row!.failed).toBeGreaterThan(0);
    expect(row!.stalled).toBeGreaterThan(0);
  });

  test('resend a failed delivery: back to Accepted, attempts counted afresh, log kept', async () => {
    const carolDelivery = await deliveryOf('carol');
    const res = await as('POST', `/deliveries/${carolDelivery}/resend`);
    expect(res.body).toEqual({ success: true, data: { deliveryId: carolDelivery, step: 'accepted' } });
    const [row] = await h.db.sql`select step, failed_step, send_attempts from deliveries where id = ${carolDelivery}`;
    expect(row).toEqual({ step: 'accepted', failed_step: null, send_attempts: 0 });
    expect(await as('POST', `/deliveries/${carolDelivery}/resend`)).toMatchObject({
      status: 400,
      body: { success: false, error: 'Only a failed delivery can be resent; this one is accepted.' },
    });
    expect(await as('POST', `/deliveries/${ZERO_ID}/resend`)).toMatchObject({ status: 404 });
  });

  test('bulk resend: the Failed deliveries in view, up to the newest counted, each resent or refused by the rule', async () => {
    const bulkThread = await openThread('Bulk');
    for (let i = 0; i < 3; i++) await h.call('POST', `/api/threads/${bulkThread}/messages`, { key: alice.key, body: { content: `bulk ${i}` } });
    await h.db.sql`update deliveries set step = 'failed', failed_step = 'accepted', error = 'gave up' where thread_id = ${bulkThread}`;
    // Six failed: bob and carol for each of three messages. Carol is archived: hers cannot go out.
    const view = `thread=${bulkThread}`;
    const counted = await as('GET', `/deliveries/failed-in-view?${view}`);
    const [newest] = await h.db.sql`select max(id::text) as id from deliveries where thread_id = ${bulkThread}`;
    expect(counted.body.data).toEqual({ failed: 6, upTo: newest!.id });
    // One more fails after the count: it is not resent by the confirmation of six.
    const late = (await h.call('POST', `/api/threads/${bulkThread}/messages`, { key: alice.key, body: { content: 'bulk late' } })).body.data.id;
    await h.db.sql`update deliveries set step = 'failed', failed_step = 'accepted', error = 'gave up' where message_id = ${late}`;
    await h.db.sql`update agents set archived_at = now() where username = 'carol'`;
    try {
      expect(await as('POST', '/deliveries/resend-failed', { thread: bulkThread })).toMatchObject({
        status: 400,
        body: { error: 'upTo must be the id of the newest Failed delivery counted, as the count answered it' },
      });
      const res = await as('POST', '/deliveries/resend-failed', { thread: bulkThread, upTo: counted.body.data.upTo });
      expect(res.body).toEqual({ success: true, data: { resent: 3, refused: [{ reason: 'its recipient is archived', count: 3 }] } });
      const steps = await h.db.sql`
        select a.username, d.message_id = ${late} as late, d.step, d.resends from deliveries d join agents a on a.id = d.recipient_id
        where d.thread_id = ${bulkThread} order by d.message_id, a.username`;
      expect(steps.map((r) => [r.username, r.late, r.step, r.resends])).toEqual([
        ...[0, 1, 2].flatMap(() => [['bob', false, 'accepted', 1], ['carol', false, 'failed', 0]]),
        ['bob', true, 'failed', 0],
        ['carol', true, 'failed', 0],
      ]);
      // A filter with no Failed deliveries in it counts none and resends none.
      expect((await as('GET', `/deliveries/failed-in-view?${view}&agent=bob&state=accepted`)).body.data).toEqual({ failed: 0, upTo: null });
    } finally {
      await h.db.sql`update agents set archived_at = null where username = 'carol'`;
    }
  });
});

describe('thread view', () => {
  test("a thread and its messages, newest first, each with its recipients' steps", async () => {
    const id = await openThread('Viewed');
    const first = await h.call('POST', `/api/threads/${id}/messages`, { key: alice.key, body: { content: 'one' } });
    const second = await h.call('POST', `/api/threads/${id}/messages`, { key: alice.key, body: { content: 'two\nlines', summary: 'Two' } });
    await h.db.sql`update deliveries set step = 'failed', failed_step = 'accepted', error = 'x' where message_id = ${first.body.data.id}
                   and recipient_id = (select id from agents where username = 'bob')`;
    expect((await as('GET', `/threads/${id}`)).body.data).toMatchObject({ id, title: 'Viewed', state: 'open', openedBy: 'alice' });
    const res = await as('GET', `/threads/${id}/messages?limit=1`);
    expect(res.body.data.items).toEqual([
      {
        id: second.body.data.id,
        sender: 'alice',
        content: 'two\nlines',
        summary: 'Two',
        createdAt: second.body.data.createdAt,
        deliveries: [
          { deliveryId: expect.any(String), recipient: 'bob', step: 'accepted', failedStep: null, stalled: false, retrying: false },
          { deliveryId: expect.any(String), recipient: 'carol', step: 'accepted', failedStep: null, stalled: false, retrying: false },
        ],
        files: [],
      },
    ]);
    const older = await as('GET', `/threads/${id}/messages?after=${res.body.data.next}`);
    expect(older.body.data.items.map((m: any) => [m.content, m.deliveries.map((d: any) => d.step)])).toEqual([['one', ['failed', 'accepted']]]);
    expect(older.body.data.next).toBeNull();
    expect(await as('GET', `/threads/${ZERO_ID}/messages`)).toMatchObject({ status: 404, body: { error: 'No such thread.' } });
    expect(await as('GET', '/threads/not-an-id')).toMatchObject({ status: 404 });
  });
});

describe('pages', () => {
  test('without a session the pages send you to sign in; with one they are served with a strict policy', async () => {
    const pkg = await Bun.file('package.json').json();
    const away = await h.send('GET', '/dashboard/deliveries');
    expect([away.status, away.headers.get('location')]).toEqual([303, '/dashboard/sign-in?next=%2Fdashboard%2Fdeliveries']);
    const deep = await h.send('GET', `/dashboard/threads/${ZERO_ID}?x=1`);
    expect(deep.headers.get('location')).toBe(`/dashboard/sign-in?next=${encodeURIComponent(`/dashboard/threads/${ZERO_ID}?x=1`)}`);
    for (const page of ['overview', 'deliveries', 'threads', 'agents', `threads/${ZERO_ID}`]) {
      const res = await h.send('GET', `/dashboard/${page}`, { cookie });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
      // Scripts from this server, and the one inline import map by its hash.
      const map = /<script type="importmap">(.*?)<\/script>/.exec(res.body)![1]!;
      const hash = createHash('sha256').update(map).digest('base64');
      expect(res.headers.get('content-security-policy')).toContain(`script-src 'self' 'sha256-${hash}';`);
      expect(res.body).toContain(`data-page="${page.startsWith('threads/') ? 'thread' : page}"`);
      expect(res.body).toContain('aria-current="page"');
      // uPlot's stylesheet only where charts are drawn (the Overview, an agent's health detail); its module is always in the map.
      expect([page, res.body.includes(`/dashboard/assets/uplot-${pkg.dependencies.uplot}.css`)]).toEqual([page, page === 'overview' || page === 'agents']);
      expect(JSON.parse(map).imports.uplot).toBe(`/dashboard/assets/uplot-${pkg.dependencies.uplot}.js`);
    }
    const signIn = await h.send('GET', '/dashboard/sign-in');
    expect(signIn.status).toBe(200);
    expect(signIn.body).not.toContain(`uplot-${pkg.dependencies.uplot}.css`);
    expect(signIn.body).toContain('<label for="email">Email</label>');
    expect((await h.send('GET', '/dashboard')).headers.get('location')).toBe('/dashboard/overview');
    const script = await h.send('GET', '/dashboard/assets/dashboard.js');
    expect([script.status, script.headers.get('content-type')]).toEqual([200, 'text/javascript; charset=utf-8']);
    // Preact, htm and uPlot are served from here, pinned to the versions package.json installs.
    for (const [name, version] of [
      ['preact', pkg.dependencies.preact],
      ['preact-hooks', pkg.dependencies.preact],
      ['htm', pkg.dependencies.htm],
      ['uplot', pkg.dependencies.uplot],
    ]) {
      const vendored = await h.send('GET', `/dashboard/assets/${name}-${version}.js`);
      expect([name, vendored.status, vendored.headers.get('content-type'), vendored.headers.get('cache-control')]).toEqual([
        name,
        200,
        'text/javascript; charset=utf-8',
        'public, max-age=31536000, immutable',
      ]);
    }
    const uplot = await h.send('GET', `/dashboard/assets/uplot-${pkg.dependencies.uplot}.js`);
    expect(uplot.body).toBe(await Bun.file('node_modules/uplot/dist/uPlot.esm.js').text());
    const uplotCss = await h.send('GET', `/dashboard/assets/uplot-${pkg.dependencies.uplot}.css`);
    expect([uplotCss.status, uplotCss.headers.get('content-type'), uplotCss.headers.get('cache-control')]).toEqual([
      200,
      'text/css; charset=utf-8',
      'public, max-age=31536000, immutable',
    ]);
    expect(uplotCss.body).toBe(await Bun.file('node_modules/uplot/dist/uPlot.min.css').text());
    const css = await h.send('GET', '/dashboard/assets/dashboard.css');
    expect([css.status, css.headers.get('content-type')]).toEqual([200, 'text/css; charset=utf-8']);
    // Every page names its icon, so a tab among many is found by it.
    expect(signIn.body).toContain('<link rel="icon" href="/dashboard/assets/favicon.svg" type="image/svg+xml">');
    const icon = await h.send('GET', '/dashboard/assets/favicon.svg');
    expect([icon.status, icon.headers.get('content-type'), icon.body]).toEqual([
      200,
      'image/svg+xml; charset=utf-8',
      await Bun.file('src/dashboard/web/favicon.svg').text(),
    ]);
  });
});
