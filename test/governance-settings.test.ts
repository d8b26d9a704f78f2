import { beforeAll, describe, expect, test } from 'bun:test';
import { runCommand } from '../src/cli/commands';
import { useDashboardHarness } from './support/dashboard';
import { uniqueName } from './support/harness';

// What people set about an agent's sending and a thread's holds (docs/guides/govern-agents.md),
// through the dashboard API and the CLI: stored, answered, and on record in the audit trail.
const h = useDashboardHarness({ SEND_MESSAGES_PER_MINUTE: '120', SEND_THREADS_PER_HOUR: '30', LOOP_BREAKER_MESSAGES: '40', LOOP_BREAKER_WINDOW_MINUTES: '5' });
const ZERO_ID = '00000000-0000-7000-8000-000000000000';

let cookie: string;
let ada: { id: string };
beforeAll(async () => {
  await h.invite('ada@example.com', 'ada');
  cookie = await h.signIn('ada@example.com');
  [ada] = (await h.db.sql`select id from people where username = 'ada'`) as unknown as [{ id: string }];
});

const as = (method: string, path: string, body?: unknown) => h.send(method, `/dashboard/api${path}`, { cookie, body });
const cli = (...argv: string[]) => runCommand({ sql: h.db.sql, config: h.config }, argv);
const refusal = (status: number, error: string, code: string, field?: string) => ({
  status,
  body: { success: false, error, code, ...(field ? { field } : {}) },
});

// The settings' entries about `subject` (its creation is on record too, and not what these test).
async function auditOf(subject: string) {
  const rows = await h.db.sql`
    select person_id, actor, action, subject_type, subject, before, after, reason from audit_events
    where subject = ${subject} and action <> 'agent.create' order by id`;
  return rows.map((r) => ({ ...r }));
}

async function thread(opener: { key: string }, others: string[]) {
  const res = await h.call('POST', '/api/threads', { key: opener.key, body: { title: uniqueName('Settings'), participantUsernames: others } });
  return res.body.data.id as string;
}

describe("an agent's sending, on the dashboard", () => {
  test('governance shows the overrides beside the deployment defaults', async () => {
    const name = uniqueName('gov');
    await h.agent(name);
    expect(await as('GET', `/agents/${name}/governance`)).toMatchObject({
      status: 200,
      body: {
        success: true,
        data: {
          username: name,
          contactPolicy: 'open',
          holdsMessages: false,
          messagesPerMinute: null,
          threadsPerHour: null,
          defaults: { messagesPerMinute: 120, threadsPerHour: 30 },
        },
      },
    });
    expect(await as('GET', '/agents/no-such/governance')).toMatchObject(refusal(404, 'No agent named no-such.', 'not_found'));
  });

  test('quotas are set, one left out stays, null restores the default; each change is on record', async () => {
    const name = uniqueName('quota');
    await h.agent(name);
    expect((await as('PUT', `/agents/${name}/quotas`, { messagesPerMinute: 10, threadsPerHour: 2 })).body).toEqual({
      success: true,
      data: { username: name, messagesPerMinute: 10, threadsPerHour: 2 },
    });
    expect((await as('PUT', `/agents/${name}/quotas`, { threadsPerHour: null })).body.data).toEqual({ username: name, messagesPerMinute: 10, threadsPerHour: null });
    // Saved unchanged: nothing decided, nothing recorded.
    expect((await as('PUT', `/agents/${name}/quotas`, { messagesPerMinute: 10 })).status).toBe(200);
    const [stored] = await h.db.sql`select messages_per_minute, threads_per_hour from agents where username = ${name}`;
    expect({ ...stored }).toEqual({ messages_per_minute: 10, threads_per_hour: null });
    expect((await as('GET', `/agents/${name}/governance`)).body.data).toMatchObject({ messagesPerMinute: 10, threadsPerHour: null });
    expect(await auditOf(name)).toEqual([
      {
        person_id: ada.id,
        actor: 'ada',
        action: 'agent.quotas.set',
        subject_type: 'agent',
        subject: name,
        before: { messagesPerMinute: null, threadsPerHour: null },
        after: { messagesPerMinute: 10, threadsPerHour: 2 },
        reason: null,
      },
      {
        person_id: ada.id,
        actor: 'ada',
        action: 'agent.quotas.set',
        subject_type: 'agent',
        subject: name,
        before: { messagesPerMinute: 10, threadsPerHour: 2 },
        after: { messagesPerMinute: 10, threadsPerHour: null },
        reason: null,
      },
    ]);
  });

  test('a quota that is not a whole number from 1 up is refused with a sentence naming it, and nothing is written', async () => {
    const name = uniqueName('quota');
    await h.agent(name);
    const must = (field: string) => `${field} must be a whole number from 1 to 2147483647, or null for the deployment's default`;
    for (const [body, field] of [
      [{ messagesPerMinute: 0 }, 'messagesPerMinute'],
      [{ messagesPerMinute: -3, threadsPerHour: 5 }, 'messagesPerMinute'],
      [{ messagesPerMinute: 1.5 }, 'messagesPerMinute'],
      [{ messagesPerMinute: '10' }, 'messagesPerMinute'],
      [{ threadsPerHour: 2147483648 }, 'threadsPerHour'],
      [{ messagesPerMinute: 5, threadsPerHour: true }, 'threadsPerHour'],
    ] as [unknown, string][]) {
      expect([body, await as('PUT', `/agents/${name}/quotas`, body)]).toMatchObject([body, refusal(400, must(field), 'invalid', field)]);
    }
    expect(await as('PUT', `/agents/${name}/quotas`, {})).toMatchObject(
      refusal(400, "Give messagesPerMinute, threadsPerHour or both: a whole number, or null for the deployment's default.", 'invalid'),
    );
    expect(await as('PUT', `/agents/${name}/quotas`, [1])).toMatchObject(refusal(400, 'body must be a JSON object', 'invalid'));
    expect(await as('PUT', '/agents/no-such/quotas', { messagesPerMinute: 5 })).toMatchObject(refusal(404, 'No agent named no-such.', 'not_found'));
    const [stored] = await h.db.sql`select messages_per_minute, threads_per_hour from agents where username = ${name}`;
    expect({ ...stored }).toEqual({ messages_per_minute: null, threads_per_hour: null });
    expect(await auditOf(name)).toEqual([]);
  });

  test("the agent's messages wait for approval, or stop waiting; each change is on record", async () => {
    const name = uniqueName('held');
    await h.agent(name);
    expect((await as('PUT', `/agents/${name}/holds`, { holds: true })).body).toEqual({ success: true, data: { username: name, holdsMessages: true } });
    expect((await as('PUT', `/agents/${name}/holds`, { holds: true })).status).toBe(200);
    expect((await as('GET', `/agents/${name}/governance`)).body.data.holdsMessages).toBe(true);
    expect((await as('PUT', `/agents/${name}/holds`, { holds: false })).body.data).toEqual({ username: name, holdsMessages: false });
    expect((await auditOf(name)).map((a) => [a.action, a.actor, a.before, a.after])).toEqual([
      ['agent.holds.set', 'ada', { holdsMessages: false }, { holdsMessages: true }],
      ['agent.holds.set', 'ada', { holdsMessages: true }, { holdsMessages: false }],
    ]);
    expect(await as('PUT', `/agents/${name}/holds`, { holds: 'yes' })).toMatchObject(refusal(400, 'holds must be true or false', 'invalid', 'holds'));
    expect(await as('PUT', `/agents/${name}/holds`)).toMatchObject(refusal(400, 'holds must be true or false', 'invalid', 'holds'));
    expect(await as('PUT', '/agents/no-such/holds', { holds: true })).toMatchObject(refusal(404, 'No agent named no-such.', 'not_found'));
  });
});

describe("a thread's holds and the loop breaker's pause, on the dashboard", () => {
  test("people see the thread's holds and pause; agents see the record as before", async () => {
    const opener = await h.agent(uniqueName('opener'));
    const other = await h.agent(uniqueName('other'));
    const id = await thread(opener, [other.username]);
    const seen = await as('GET', `/threads/${id}`);
    expect(seen.status).toBe(200);
    expect(seen.body.data).toMatchObject({ id, state: 'open', holdsMessages: false, pausedAt: null, waiting: 0, loopBreaker: { messages: 40, windowMinutes: 5 } });
    const agentView = (await h.call('GET', `/api/threads/${id}`, { key: opener.key })).body.data;
    expect(Object.keys(agentView).toSorted()).toEqual(['createdAt', 'goal', 'id', 'openedBy', 'participants', 'state', 'title']);
    expect(await as('GET', `/threads/${ZERO_ID}`)).toMatchObject(refusal(404, 'No such thread.', 'not_found'));
    expect(await as('GET', '/threads/not-an-id')).toMatchObject(refusal(404, 'No such thread.', 'not_found'));
  });

  test("a thread's messages wait for approval, or stop waiting; each change is on record", async () => {
    const opener = await h.agent(uniqueName('opener'));
    const id = await thread(opener, []);
    expect((await as('PUT', `/threads/${id}/holds`, { holds: true })).body).toEqual({ success: true, data: { id, holdsMessages: true, pausedAt: null } });
    expect((await as('GET', `/threads/${id}`)).body.data.holdsMessages).toBe(true);
    expect((await as('PUT', `/threads/${id}/holds`, { holds: true })).status).toBe(200);
    expect((await as('PUT', `/threads/${id}/holds`, { holds: false })).body.data).toEqual({ id, holdsMessages: false, pausedAt: null });
    expect(await auditOf(id)).toEqual([
      { person_id: ada.id, actor: 'ada', action: 'thread.holds.set', subject_type: 'thread', subject: id, before: { holdsMessages: false }, after: { holdsMessages: true }, reason: null },
      { person_id: ada.id, actor: 'ada', action: 'thread.holds.set', subject_type: 'thread', subject: id, before: { holdsMessages: true }, after: { holdsMessages: false }, reason: null },
    ]);
    expect(await as('PUT', `/threads/${id}/holds`, { holds: 1 })).toMatchObject(refusal(400, 'holds must be true or false', 'invalid', 'holds'));
    expect(await as('PUT', `/threads/${ZERO_ID}/holds`, { holds: true })).toMatchObject(refusal(404, 'No such thread.', 'not_found'));
    expect(await as('PUT', '/threads/nope/holds', { holds: true })).toMatchObject(refusal(404, 'No such thread.', 'not_found'));
  });

  test('a paused thread is resumed: the loop breaker counts from now, and the resume is on record', async () => {
    const opener = await h.agent(uniqueName('opener'));
    const id = await thread(opener, []);
    expect(await as('POST', `/threads/${id}/resume`)).toMatchObject(
      refusal(400, 'The thread is not paused: only a thread the loop breaker paused can be resumed.', 'invalid'),
    );
    // What the loop breaker writes when it trips.
    const [paused] = await h.db.sql<{ pausedAt: Date }[]>`update threads set paused_at = now() - interval '1 minute' where id = ${id} returning paused_at as "pausedAt"`;
    expect((await as('GET', `/threads/${id}`)).body.data.pausedAt).toBe(paused!.pausedAt.toISOString());
    const res = await as('POST', `/threads/${id}/resume`);
    expect(res.status).toBe(200);
    const [stored] = await h.db.sql<{ paused_at: Date | null; loop_counted_from: Date }[]>`select paused_at, loop_counted_from from threads where id = ${id}`;
    expect(stored!.paused_at).toBeNull();
    expect(Date.now() - stored!.loop_counted_from.getTime()).toBeLessThan(5_000);
    expect(res.body.data).toEqual({ id, holdsMessages: false, pausedAt: null, loopCountedFrom: stored!.loop_counted_from.toISOString() });
    expect(await auditOf(id)).toEqual([
      {
        person_id: ada.id,
        actor: 'ada',
        action: 'thread.resume',
        subject_type: 'thread',
        subject: id,
        before: { pausedAt: paused!.pausedAt.toISOString() },
        after: { pausedAt: null, loopCountedFrom: stored!.loop_counted_from.toISOString() },
        reason: null,
      },
    ]);
    expect((await as('POST', `/threads/${id}/resume`)).status).toBe(400);
    expect(await as('POST', `/threads/${ZERO_ID}/resume`)).toMatchObject(refusal(404, 'No such thread.', 'not_found'));
  });

  test('open dashboards hear of a change to the settings', async () => {
    const opener = await h.agent(uniqueName('opener'));
    const id = await thread(opener, []);
    const heard: string[] = [];
    const listening = await h.db.sql.listen('ams_dashboard', (payload) => heard.push(payload));
    try {
      await as('PUT', `/threads/${id}/holds`, { holds: true });
      await h.db.sql`update threads set paused_at = now() where id = ${id}`;
      // Naming the column without changing it (as a post that finds no loop does) tells nobody.
      await h.db.sql`update threads set paused_at = paused_at, holds_messages = holds_messages where id = ${id}`;
      await as('PUT', `/agents/${opener.username}/quotas`, { messagesPerMinute: 7 });
      const [agent] = await h.db.sql`select id from agents where username = ${opener.username}`;
      const expected = [`thread:${id}`, `thread:${id}`, `agent:${agent!.id}`];
      for (let i = 0; i < 100 && heard.length < expected.length; i++) await Bun.sleep(20);
      await Bun.sleep(100);
      expect(heard).toEqual(expected);
    } finally {
      await listening.unlisten();
    }
  });

  test('an agent key is refused on every settings route', async () => {
    const agent = await h.agent(uniqueName('key'));
    for (const [method, path] of [
      ['GET', `/agents/${agent.username}/governance`],
      ['PUT', `/agents/${agent.username}/quotas`],
      ['PUT', `/agents/${agent.username}/holds`],
      ['PUT', `/threads/${ZERO_ID}/holds`],
      ['POST', `/threads/${ZERO_ID}/resume`],
    ]) {
      const res = await h.send(method!, `/dashboard/api${path}`, { headers: { authorization: `Bearer ${agent.key}` }, body: { holds: true } });
      expect([path, res.status]).toEqual([path, 401]);
      expect((await h.send(method!, `/dashboard/api${path}`, { body: { holds: true } })).status).toBe(401);
    }
  });
});

describe('the same settings from the CLI', () => {
  test('agents quotas sets, keeps and restores the defaults, on record as the CLI', async () => {
    const name = uniqueName('cliq');
    await h.agent(name);
    expect(await cli('agents', 'quotas', name, '--messages-per-minute', '30', '--threads-per-hour', '4')).toEqual({
      username: name,
      messagesPerMinute: 30,
      threadsPerHour: 4,
    });
    expect(await cli('agents', 'quotas', name, '--threads-per-hour', 'default')).toEqual({ username: name, messagesPerMinute: 30, threadsPerHour: null });
    expect(await auditOf(name)).toEqual([
      { person_id: null, actor: 'cli', action: 'agent.quotas.set', subject_type: 'agent', subject: name, before: { messagesPerMinute: null, threadsPerHour: null }, after: { messagesPerMinute: 30, threadsPerHour: 4 }, reason: null },
      { person_id: null, actor: 'cli', action: 'agent.quotas.set', subject_type: 'agent', subject: name, before: { messagesPerMinute: 30, threadsPerHour: 4 }, after: { messagesPerMinute: 30, threadsPerHour: null }, reason: null },
    ]);
    const must = "messagesPerMinute must be a whole number from 1 to 2147483647, or null for the deployment's default";
    await expect(cli('agents', 'quotas', name, '--messages-per-minute', 'lots')).rejects.toThrow(must);
    await expect(cli('agents', 'quotas', name, '--messages-per-minute', '0')).rejects.toThrow(must);
    await expect(cli('agents', 'quotas', name)).rejects.toThrow("Give messagesPerMinute, threadsPerHour or both: a whole number, or null for the deployment's default.");
    await expect(cli('agents', 'quotas', 'no-such', '--threads-per-hour', '3')).rejects.toThrow('No agent named no-such.');
    await expect(cli('agents', 'quotas', name, '--per-minute', '3')).rejects.toThrow('Unknown option --per-minute.');
    await expect(cli('agents', 'quotas')).rejects.toThrow('Usage: agents quotas <username>');
    expect((await auditOf(name)).length).toBe(2);
  });

  test('agents hold and release', async () => {
    const name = uniqueName('clih');
    await h.agent(name);
    expect(await cli('agents', 'hold', name)).toEqual({ username: name, holdsMessages: true });
    expect(await cli('agents', 'release', name)).toEqual({ username: name, holdsMessages: false });
    expect((await auditOf(name)).map((a) => [a.actor, a.action, a.after])).toEqual([
      ['cli', 'agent.holds.set', { holdsMessages: true }],
      ['cli', 'agent.holds.set', { holdsMessages: false }],
    ]);
    await expect(cli('agents', 'hold', 'no-such')).rejects.toThrow('No agent named no-such.');
  });

  test('threads hold, release and resume', async () => {
    const opener = await h.agent(uniqueName('opener'));
    const id = await thread(opener, []);
    expect(await cli('threads', 'hold', id)).toEqual({ id, holdsMessages: true, pausedAt: null });
    expect(await cli('threads', 'release', id)).toEqual({ id, holdsMessages: false, pausedAt: null });
    await expect(cli('threads', 'resume', id)).rejects.toThrow('The thread is not paused: only a thread the loop breaker paused can be resumed.');
    await h.db.sql`update threads set paused_at = now() where id = ${id}`;
    expect(await cli('threads', 'resume', id)).toMatchObject({ id, pausedAt: null, loopCountedFrom: expect.any(String) });
    expect((await auditOf(id)).map((a) => [a.person_id, a.actor, a.action])).toEqual([
      [null, 'cli', 'thread.holds.set'],
      [null, 'cli', 'thread.holds.set'],
      [null, 'cli', 'thread.resume'],
    ]);
    for (const verb of ['hold', 'release', 'resume']) {
      await expect(cli('threads', verb, ZERO_ID)).rejects.toThrow('No such thread.');
      await expect(cli('threads', verb, 'not-an-id')).rejects.toThrow('No such thread.');
    }
  });
});
