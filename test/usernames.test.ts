import { expect, test } from 'bun:test';
import { createAgent } from '../src/domain/agents/agents';
import { DomainError } from '../src/domain/shared/errors';
import { invitePerson } from '../src/domain/people/people';
import { useHarness } from './support/harness';
import { BY_CLI } from '../src/domain/people/audit';

const h = useHarness();

test('an agent and a person created together under one name: exactly one gets it, the other 409', async () => {
  const names = Array.from({ length: 50 }, (_, i) => `contested-${i}`);
  const outcomes = await Promise.all(
    names.map(async (name) => {
      const [agent, person] = await Promise.allSettled([
        createAgent(h.db.sql, BY_CLI, { username: name }, { allowLocal: true }),
        invitePerson(h.db.sql, BY_CLI, { email: `${name}@example.com`, username: name }),
      ]);
      const refusal = (r: PromiseSettledResult<unknown>) =>
        r.status === 'rejected' && r.reason instanceof DomainError ? [r.reason.kind, r.reason.message] : null;
      return agent.status === 'fulfilled'
        ? { name, won: 'agent', refusal: refusal(person) }
        : { name, won: person.status === 'fulfilled' ? 'person' : 'nobody', refusal: refusal(agent) };
    }),
  );
  for (const { name, won, refusal } of outcomes) {
    expect(won).not.toBe('nobody');
    expect(refusal).toEqual(
      won === 'agent'
        ? ['conflict', `An agent is already named ${name}; choose another username.`]
        : ['conflict', `A person is already named ${name}; choose another username.`],
    );
  }
  const rows = await h.db.sql<{ username: string; agent: boolean; person: boolean }[]>`
    select n as username,
           exists (select 1 from agents where username = n) as agent,
           exists (select 1 from people where username = n) as person
    from unnest(${names}::text[]) n order by n`;
  expect(rows.filter((r) => r.agent === r.person)).toEqual([]);
  const wonBy = new Map(outcomes.map((o) => [o.name, o.won]));
  for (const r of rows) expect(r.agent ? 'agent' : 'person').toBe(wonBy.get(r.username)!);
});

test('a name refused to an agent stays free of half-written rows, and so does one refused to a person', async () => {
  await createAgent(h.db.sql, BY_CLI, { username: 'taken-by-agent' }, { allowLocal: true });
  await invitePerson(h.db.sql, BY_CLI, { email: 'taken@example.com', username: 'taken-by-person' });
  await expect(invitePerson(h.db.sql, BY_CLI, { email: 'other@example.com', username: 'taken-by-agent' })).rejects.toThrow(
    'An agent is already named taken-by-agent; choose another username.',
  );
  await expect(createAgent(h.db.sql, BY_CLI, { username: 'taken-by-person' }, { allowLocal: true })).rejects.toThrow(
    'A person is already named taken-by-person; choose another username.',
  );
  // An invitation refused for its email must not keep the username it would have taken.
  await expect(invitePerson(h.db.sql, BY_CLI, { email: 'taken@example.com', username: 'never-claimed' })).rejects.toThrow(
    'taken@example.com is already invited.',
  );
  expect((await createAgent(h.db.sql, BY_CLI, { username: 'never-claimed' }, { allowLocal: true })).username).toBe('never-claimed');
  const names = ['taken-by-agent', 'taken-by-person', 'never-claimed'];
  const [counts] = await h.db.sql`
    select (select count(*)::int from agents where username = any(${names})) as agents,
           (select count(*)::int from people where username = any(${names})) as people`;
  expect(counts).toEqual({ agents: 2, people: 1 });
});

test('the database itself refuses a row that would put one name in both tables, whoever writes it', async () => {
  await invitePerson(h.db.sql, BY_CLI, { email: 'plain@example.com', username: 'held-by-person' });
  await createAgent(h.db.sql, BY_CLI, { username: 'held-by-agent' }, { allowLocal: true });
  await expect(h.db.sql`insert into agents (username, key_hash) values ('held-by-person', '\\x00')`).rejects.toThrow(/foreign key/);
  await expect(h.db.sql`insert into people (email, username) values ('x@example.com', 'held-by-agent')`).rejects.toThrow(/foreign key/);
});
