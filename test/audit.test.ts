import { beforeAll, describe, expect, test } from 'bun:test';
import { runCommand } from '../src/cli/commands';
import { connectClient } from '../src/domain/oauth/oauth-connections';
import { byPerson, type AuditEntry } from '../src/domain/people/audit';
import type { Person } from '../src/domain/people/people';
import { useDashboardHarness } from './support/dashboard';
import { uniqueName } from './support/harness';

const h = useDashboardHarness();

let cookie: string;
let ada: Person;
let opener: { username: string; key: string };
let member: { username: string; key: string };

beforeAll(async () => {
  await h.invite('audit-ada@example.com', 'audit-ada');
  cookie = await h.signIn('audit-ada@example.com');
  ada = (await h.db.sql<Person[]>`select id, email, username from people where username = 'audit-ada'`)[0]!;
  opener = await h.agent(uniqueName('opener'));
  member = await h.agent(uniqueName('member'));
});

const as = (method: string, path: string, body?: unknown) => h.send(method, `/dashboard/api${path}`, { cookie, body });
const cli = (...argv: string[]) => runCommand({ sql: h.db.sql, config: h.config }, argv);

// An entry's id of the time `at` (an expression of `x`), as uuid_v7() would have taken it then.
const idAt = (at: string) => `encode(overlay(uuid_send(gen_random_uuid()) placing substring(int8send((extract(epoch from ${at}) * 1000)::bigint) from 3) from 1 for 6), 'hex')::uuid`;

type Row = { person: string | null; actor: string; action: string; subjectType: string; subject: string; before: unknown; after: unknown };

// The entries `act` wrote: what the audit table holds after it and not before.
async function recorded(act: () => Promise<unknown>): Promise<Record<string, unknown>[]> {
  const [mark] = await h.db.sql<{ id: string | null }[]>`select max(id::text) as id from audit_events`;
  await act();
  return h.db.sql<Row[]>`
    select person_id as person, actor, action, subject_type as "subjectType", subject, before, after
    from audit_events where ${mark!.id ? h.db.sql`id > ${mark!.id}` : h.db.sql`true`} order by id`;
}

async function expectStatus(res: Promise<{ status: number }>, status: number) {
  expect((await res).status).toBe(status);
}

// A thread of opener and member whose close opener asked for.
async function closePendingThread(): Promise<string> {
  const threadId = await h.thread(opener, [member]);
  await h.call('POST', `/api/threads/${threadId}/close`, { key: opener.key });
  return threadId;
}

async function failedDelivery(): Promise<string> {
  const threadId = await h.thread(opener, [member]);
  await h.post(opener, threadId, 'one that fails');
  const [d] = await h.db.sql`
    update deliveries set step = 'failed', failed_step = 'accepted', error = 'Handler answered 500'
    where thread_id = ${threadId} returning id`;
  return d!.id;
}

describe('a person on the dashboard: each decision writes one entry, with who and before/after', () => {
  const by = (row: Partial<Row>) => ({ person: ada.id, actor: 'audit-ada', before: null, after: null, ...row });

  test('agents: create, archive, unarchive, A2A card', async () => {
    const name = uniqueName('dash');
    expect(await recorded(() => expectStatus(as('POST', '/agents', { username: name }), 201))).toEqual([
      by({ action: 'agent.create', subjectType: 'agent', subject: name, after: { webhookUrl: null } }),
    ]);
    expect(await recorded(() => expectStatus(as('POST', `/agents/${name}/archive`), 200))).toEqual([
      by({ action: 'agent.archive', subjectType: 'agent', subject: name, before: { archived: false }, after: { archived: true } }),
    ]);
    expect(await recorded(() => expectStatus(as('POST', `/agents/${name}/unarchive`), 200))).toEqual([
      by({ action: 'agent.unarchive', subjectType: 'agent', subject: name, before: { archived: true }, after: { archived: false } }),
    ]);
    expect(await recorded(() => expectStatus(as('PUT', `/agents/${name}/a2a-card`, { listed: true }), 200))).toEqual([
      by({ action: 'agent.a2a_card.set', subjectType: 'agent', subject: name, before: { listed: false }, after: { listed: true } }),
    ]);
  });

  test('webhooks: set, reveal the secret, switch back on, remove; the secret is never recorded', async () => {
    const name = uniqueName('hooked');
    await as('POST', '/agents', { username: name, webhookUrl: 'http://127.0.0.1:9/first' });
    const rows = await recorded(async () => {
      await expectStatus(as('PUT', `/agents/${name}/webhook`, { webhookUrl: 'http://127.0.0.1:9/second' }), 200);
      await expectStatus(as('GET', `/agents/${name}/webhook/secret`), 200);
      await h.db.sql`update agents set webhook_disabled_at = now(), webhook_disabled_reason = 'failing' where username = ${name}`;
      await expectStatus(as('POST', `/agents/${name}/webhook/enable`, { withoutPassingTest: true }), 200);
      await expectStatus(as('POST', `/agents/${name}/webhook/pause`, { reason: 'deploying the handler' }), 200);
      await expectStatus(as('POST', `/agents/${name}/webhook/resume`, {}), 200);
      await expectStatus(as('DELETE', `/agents/${name}/webhook`), 200);
    });
    expect(rows).toEqual([
      by({ action: 'agent.webhook.set', subjectType: 'agent', subject: name, before: { webhookUrl: 'http://127.0.0.1:9/first' }, after: { webhookUrl: 'http://127.0.0.1:9/second' } }),
      by({ action: 'agent.webhook.secret.reveal', subjectType: 'agent', subject: name }),
      by({ action: 'agent.webhook.enable', subjectType: 'agent', subject: name, before: { switchedOff: true }, after: { switchedOff: false, resent: 0, passingTest: false } }),
      by({ action: 'agent.webhook.pause', subjectType: 'agent', subject: name, before: { state: 'active' }, after: { state: 'paused' } }),
      by({ action: 'agent.webhook.resume', subjectType: 'agent', subject: name, before: { state: 'paused', pausedBy: 'audit-ada' }, after: { state: 'active', resent: 0 } }),
      by({ action: 'agent.webhook.remove', subjectType: 'agent', subject: name, before: { webhookUrl: 'http://127.0.0.1:9/second' }, after: { webhookUrl: null } }),
    ]);
    const [all] = await h.db.sql`select string_agg(before::text || after::text, ' ') as text from audit_events where subject = ${name}`;
    expect(all!.text).not.toContain('whsec_');
  });

  test('threads: remove a participant, confirm and decline a close', async () => {
    const threadId = await h.thread(opener, [member]);
    expect(await recorded(() => expectStatus(as('DELETE', `/threads/${threadId}/participants/${member.username}`), 200))).toEqual([
      by({
        action: 'thread.participant.remove',
        subjectType: 'thread',
        subject: threadId,
        before: { participants: [opener.username, member.username] },
        after: { participants: [opener.username] },
      }),
    ]);
    const confirmed = await closePendingThread();
    expect(await recorded(() => expectStatus(as('POST', `/threads/${confirmed}/confirm-close`), 200))).toEqual([
      by({ action: 'thread.close.confirm', subjectType: 'thread', subject: confirmed, before: { state: 'close-pending' }, after: { state: 'closed' } }),
    ]);
    const declined = await closePendingThread();
    expect(await recorded(() => expectStatus(as('POST', `/threads/${declined}/decline-close`), 200))).toEqual([
      by({ action: 'thread.close.decline', subjectType: 'thread', subject: declined, before: { state: 'close-pending' }, after: { state: 'open' } }),
    ]);
  });

  test('deliveries: resend one, and resend every failed one in view', async () => {
    const one = await failedDelivery();
    expect(await recorded(() => expectStatus(as('POST', `/deliveries/${one}/resend`), 200))).toEqual([
      by({ action: 'delivery.resend', subjectType: 'delivery', subject: one, before: { step: 'failed' }, after: { step: 'accepted' } }),
    ]);
    const newest = await failedDelivery();
    const [thread] = await h.db.sql`select thread_id from deliveries where id = ${newest}`;
    expect(await recorded(() => expectStatus(as('POST', '/deliveries/resend-failed', { thread: thread!.thread_id, upTo: newest }), 200))).toEqual([
      by({
        action: 'delivery.resend_failed',
        subjectType: 'delivery',
        subject: newest,
        before: { failed: 1, filter: { threadId: thread!.thread_id } },
        after: { resent: 1, refused: [] },
      }),
    ]);
  });

  test("connected clients: a person's approval and disconnect", async () => {
    const [agent] = await h.db.sql`select id from agents where username = ${member.username}`;
    const grantId = uniqueName('grant');
    const input = { grantId, clientId: 'client-1', clientName: 'Editor', clientUri: null, agentId: agent!.id, personId: ada.id };
    expect(await recorded(() => connectClient(h.db.sql, byPerson(ada), input))).toEqual([
      by({ action: 'agent.connection.approve', subjectType: 'agent', subject: member.username, after: { grantId, clientId: 'client-1', clientName: 'Editor' } }),
    ]);
    expect(await recorded(() => expectStatus(as('DELETE', `/connections/${grantId}`), 200))).toEqual([
      by({ action: 'agent.connection.revoke', subjectType: 'agent', subject: member.username, before: { grantId, clientId: 'client-1', clientName: 'Editor' } }),
    ]);
  });

  test('a decision that changes nothing records nothing', async () => {
    const name = uniqueName('same');
    await as('POST', '/agents', { username: name });
    await as('POST', `/agents/${name}/archive`);
    const confirmed = await closePendingThread();
    await as('POST', `/threads/${confirmed}/confirm-close`);
    const delivered = await h.thread(opener, [member]);
    await h.post(opener, delivered, 'not failed');
    const [d] = await h.db.sql`select id from deliveries where thread_id = ${delivered}`;
    const rows = await recorded(async () => {
      await expectStatus(as('POST', `/agents/${name}/archive`), 200);
      await expectStatus(as('PUT', `/agents/${name}/a2a-card`, { listed: false }), 200);
      await expectStatus(as('POST', `/threads/${confirmed}/confirm-close`), 200);
      await expectStatus(as('POST', '/deliveries/resend-failed', { thread: delivered, upTo: d!.id }), 200);
    });
    expect(rows).toEqual([]);
  });

  test('a decision that fails writes nothing', async () => {
    const taken = uniqueName('taken');
    await as('POST', '/agents', { username: taken });
    const open = await h.thread(opener, [member]);
    const delivered = await h.thread(opener, [member]);
    await h.post(opener, delivered, 'not failed');
    const [d] = await h.db.sql`select id from deliveries where thread_id = ${delivered}`;
    const rows = await recorded(async () => {
      await expectStatus(as('POST', '/agents', { username: taken }), 409);
      await expectStatus(as('POST', '/agents/no-such-agent/archive'), 404);
      await expectStatus(as('PUT', `/agents/${taken}/webhook`, { webhookUrl: 'not a url' }), 400);
      await expectStatus(as('DELETE', '/agents/no-such-agent/webhook'), 404);
      await expectStatus(as('POST', `/agents/${taken}/webhook/enable`, {}), 409);
      await expectStatus(as('POST', `/agents/${taken}/webhook/pause`, {}), 409);
      await expectStatus(as('POST', `/agents/${taken}/webhook/resume`, {}), 409);
      await expectStatus(as('GET', `/agents/${taken}/webhook/secret`), 404);
      await expectStatus(as('PUT', `/agents/${taken}/a2a-card`, { listed: 'yes' }), 400);
      await expectStatus(as('DELETE', `/threads/${open}/participants/no-such-agent`), 404);
      await expectStatus(as('POST', `/threads/${open}/decline-close`), 400);
      await expectStatus(as('POST', `/deliveries/${d!.id}/resend`), 400);
      await expectStatus(as('DELETE', '/connections/no-such-grant'), 404);
    });
    expect(rows).toEqual([]);
  });
});

describe('the CLI: each decision writes one entry by cli, with no person', () => {
  const by = (row: Partial<Row>) => ({ person: null, actor: 'cli', before: null, after: null, ...row });

  test('agents, webhooks, close decisions, resend and invitations', async () => {
    const name = uniqueName('cli');
    const invited = uniqueName('invited');
    const confirmed = await closePendingThread();
    const declined = await closePendingThread();
    const failed = await failedDelivery();
    const rows = await recorded(async () => {
      await cli('agents', 'create', name, '--webhook', 'http://127.0.0.1:9/a');
      await cli('agents', 'archive', name);
      await cli('agents', 'unarchive', name);
      await cli('webhooks', 'set', name, 'http://127.0.0.1:9/b');
      await cli('webhooks', 'remove', name);
      await cli('threads', 'confirm-close', confirmed);
      await cli('threads', 'decline-close', declined);
      await cli('deliveries', 'resend', failed);
      await cli('people', 'invite', `${invited}@example.com`, invited);
    });
    expect(rows).toEqual([
      by({ action: 'agent.create', subjectType: 'agent', subject: name, after: { webhookUrl: 'http://127.0.0.1:9/a' } }),
      by({ action: 'agent.archive', subjectType: 'agent', subject: name, before: { archived: false }, after: { archived: true } }),
      by({ action: 'agent.unarchive', subjectType: 'agent', subject: name, before: { archived: true }, after: { archived: false } }),
      by({ action: 'agent.webhook.set', subjectType: 'agent', subject: name, before: { webhookUrl: 'http://127.0.0.1:9/a' }, after: { webhookUrl: 'http://127.0.0.1:9/b' } }),
      by({ action: 'agent.webhook.remove', subjectType: 'agent', subject: name, before: { webhookUrl: 'http://127.0.0.1:9/b' }, after: { webhookUrl: null } }),
      by({ action: 'thread.close.confirm', subjectType: 'thread', subject: confirmed, before: { state: 'close-pending' }, after: { state: 'closed' } }),
      by({ action: 'thread.close.decline', subjectType: 'thread', subject: declined, before: { state: 'close-pending' }, after: { state: 'open' } }),
      by({ action: 'delivery.resend', subjectType: 'delivery', subject: failed, before: { step: 'failed' }, after: { step: 'accepted' } }),
      by({ action: 'person.invite', subjectType: 'person', subject: invited, after: { email: `${invited}@example.com`, username: invited } }),
    ]);
  });

  test('a refused command writes nothing', async () => {
    const rows = await recorded(async () => {
      await expect(cli('agents', 'create', opener.username)).rejects.toThrow(`An agent named ${opener.username} already exists.`);
      await expect(cli('agents', 'archive', 'no-such-agent')).rejects.toThrow('No agent named no-such-agent.');
      await expect(cli('people', 'invite', 'audit-ada@example.com', uniqueName('again'))).rejects.toThrow('audit-ada@example.com is already invited.');
    });
    expect(rows).toEqual([]);
  });
});

describe('the list: filters and pages, newest first', () => {
  const subject = uniqueName('listed');
  const other = uniqueName('other');
  const ids: string[] = [];

  // Six entries of their own, an hour apart: three about `subject` by ada, three about `other` by the CLI.
  beforeAll(async () => {
    const rows = [
      ['audit-ada', 'agent.archive', subject, '6 hours'],
      ['cli', 'agent.webhook.set', other, '5 hours'],
      ['audit-ada', 'agent.unarchive', subject, '4 hours'],
      ['cli', 'thread.close.confirm', other, '3 hours'],
      ['audit-ada', 'agent.webhook.remove', subject, '2 hours'],
      ['cli', 'agent.archive', other, '1 hour'],
    ];
    for (const [actor, action, about, age] of rows) {
      const [row] = await h.db.sql`
        insert into audit_events (id, at, person_id, actor, action, subject_type, subject, before, after)
        select ${h.db.sql.unsafe(idAt('x.at'))}, x.at, ${actor === 'cli' ? null : ada.id}, ${actor!}, ${action!}, 'agent', ${about!},
               '{"archived":false}', '{"archived":true}'
        from (select now() - ${age!}::interval as at) x
        returning id`;
      ids.push(row!.id);
    }
  });

  const list = async (query: string) => {
    const res = await as('GET', `/audit?${query}`);
    expect(res.status).toBe(200);
    return res.body.data as { items: AuditEntry[]; next: string | null };
  };
  const mine = (page: { items: { id: string }[] }) => page.items.filter((e) => ids.includes(e.id)).map((e) => ids.indexOf(e.id));

  test('an entry as the list shows it', async () => {
    const page = await list(`subject=${subject}&limit=1`);
    expect(page.items).toEqual([
      {
        id: ids[4]!,
        at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        actor: 'audit-ada',
        action: 'agent.webhook.remove',
        subjectType: 'agent',
        subject,
        before: { archived: false },
        after: { archived: true },
        reason: null,
      },
    ]);
  });

  test('by subject, by action or its family, by who decided, by time; combined', async () => {
    expect(mine(await list(`subject=${subject}`))).toEqual([4, 2, 0]);
    expect(mine(await list(`subject=${other}&action=agent.`))).toEqual([5, 1]);
    expect(mine(await list(`subject=${other}&action=agent.archive`))).toEqual([5]);
    expect(mine(await list(`subject=${other}&action=thread.close.`))).toEqual([3]);
    expect(mine(await list(`actor=cli&subject=${other}`))).toEqual([5, 3, 1]);
    expect(mine(await list(`actor=audit-ada&subject=${other}`))).toEqual([]);
    const at = (hoursAgo: number) => new Date(Date.now() - hoursAgo * 3_600_000 + 60_000).toISOString();
    expect(mine(await list(`subject=${subject}&since=${at(5)}`))).toEqual([4, 2]);
    expect(mine(await list(`subject=${subject}&since=${at(5)}&until=${at(3)}`))).toEqual([2]);
    expect(mine(await list(`subject=${subject}&since=3h`))).toEqual([4]);
    expect((await list('action=no.such.')).items).toEqual([]);
  });

  test('pages by cursor until the last', async () => {
    const first = await list(`subject=${other}&limit=2`);
    expect(mine(first)).toEqual([5, 3]);
    expect(first.next).toBe(ids[3]!);
    const second = await list(`subject=${other}&limit=2&after=${first.next}`);
    expect(mine(second)).toEqual([1]);
    expect(second.next).toBeNull();
  });

  test('a value that cannot mean anything is a 400 naming it', async () => {
    for (const [query, error] of [
      ['since=yesterday', 'since must be a time such as 2026-11-23T09:30:00Z, or a duration back from now such as 24h or 7d'],
      ['until=2026-13-45T99:00', 'until must be a time such as 2026-11-23T09:30:00Z, or a duration back from now such as 24h or 7d'],
      ['since=1h&until=2h', 'since must be earlier than until'],
      ['after=not-an-id', 'after must be an id taken from the list'],
    ]) {
      const res = await as('GET', `/audit?${query}`);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ success: false, error: error });
    }
  });

  test('only for people: an agent key or no session is 401', async () => {
    expect((await h.send('GET', '/dashboard/api/audit')).status).toBe(401);
    expect((await h.send('GET', '/dashboard/api/audit', { headers: { authorization: `Bearer ${opener.key}` } })).status).toBe(401);
  });
});

describe('ams audit export', () => {
  test('JSON lines, oldest first, from --since to --until, of an action family; a missing --since is refused', async () => {
    const about = uniqueName('exported');
    // More than one batch of the export, so that its cursor is exercised: 1 200 entries half a
    // second apart, up to `base`.
    const base = new Date();
    await h.db.sql`
      insert into audit_events (id, at, actor, action, subject_type, subject, after)
      select ${h.db.sql.unsafe(idAt('x.at'))}, x.at, 'cli', case when x.n % 2 = 0 then 'agent.archive' else 'thread.close.confirm' end,
             'agent', ${about}, jsonb_build_object('n', x.n)
      from (select n, ${base}::timestamptz - (1201 - n) * interval '0.5 second' as at from generate_series(1, 1200) n) x`;
    const env = { ...process.env, DATABASE_URL: h.db.url };
    const run = (...args: string[]) => Bun.spawnSync(['bun', 'src/main.ts', 'audit', 'export', ...args], { env });

    const all = run('--since', '1h', '--action', 'agent.');
    expect(all.exitCode).toBe(0);
    const lines = all.stdout.toString().trimEnd().split('\n').map((l) => JSON.parse(l));
    const ours = lines.filter((l) => l.subject === about);
    expect(ours.map((l) => l.after.n)).toEqual(Array.from({ length: 600 }, (_, i) => 2 * (i + 1)));
    expect(ours[0]).toEqual({
      id: expect.any(String),
      at: expect.any(String),
      actor: 'cli',
      action: 'agent.archive',
      subjectType: 'agent',
      subject: about,
      before: null,
      after: { n: 2 },
      reason: null,
    });
    expect(lines.every((l) => l.action.startsWith('agent.'))).toBe(true);
    expect(lines.map((l) => l.id)).toEqual([...lines.map((l) => l.id)].sort());

    // From 400 s before `base` to 300 s before it, both included.
    const ago = (seconds: number) => new Date(base.getTime() - seconds * 1000).toISOString();
    const window = run('--since', ago(400), '--until', ago(300));
    expect(window.exitCode).toBe(0);
    const windowed = window.stdout.toString().trimEnd().split('\n').map((l) => JSON.parse(l)).filter((l) => l.subject === about);
    expect(windowed.map((l) => l.after.n)).toEqual(Array.from({ length: 201 }, (_, i) => 401 + i));

    const missing = run();
    expect(missing.exitCode).toBe(1);
    expect(missing.stderr.toString().trim()).toBe('audit export needs --since: an ISO time or a duration back from now such as 24h or 7d.');
    const bad = run('--since', 'last week');
    expect(bad.exitCode).toBe(1);
    expect(bad.stderr.toString().trim()).toBe('since must be a time such as 2026-11-23T09:30:00Z, or a duration back from now such as 24h or 7d');
  });
});
