import { randomBytes, randomInt } from 'node:crypto';
import { Type as T } from '@sinclair/typebox';
import type { Sql, TransactionSql } from '../../db/connect';
import type { Actor } from '../agents/actors';
import { conflict, invalid, rateLimited } from '../shared/errors';
import { hashKey } from '../agents/keys';
import { Username } from '../shared/schemas';
import { claimUsername, usernameOwner } from '../agents/usernames';
import { validate } from '../shared/validate';
import { recordDecision, type Decider } from './audit';

// People operate the service from the dashboard. Nobody signs up: an admin invites them, and they
// sign in with a one-time code sent to their email, which opens an expiring session.

export type Person = { id: string; email: string; username: string };

export const personActor = (person: Person): Actor => ({ kind: 'person', id: person.id, username: person.username });

// Delivers a sign-in code to its person. Fire and forget: it reports its own failures, and the
// caller must not wait for it, so that known and unknown addresses take the same time to answer.
export type CodeSender = (to: { email: string; username: string }, code: string) => void;

export const SIGN_IN = {
  codeTtlMinutes: 10,
  windowMinutes: 15,
  codeRequestsPerEmail: 5,
  codeRequestsPerClient: 20,
  // Wrong codes are counted per email from one address, so that a stranger who guesses locks out
  // only themselves; the higher count per email across addresses still stops a distributed guess.
  wrongCodesPerEmailAndClient: 5,
  wrongCodesPerEmail: 50,
  wrongCodesPerClient: 20,
} as const;

const Email = T.String({
  minLength: 3,
  maxLength: 254,
  pattern: '^[^\\s@]+@[^\\s@]+$',
  description: 'must be an email address such as ada@example.com',
});
const Code = T.String({ minLength: 1, maxLength: 32 });
const CodeRequest = T.Object({ email: Email });
const CodeCheck = T.Object({ email: Email, code: Code });

const normalEmail = (email: string) => email.trim().toLowerCase();

export async function invitePerson(sql: Sql, decider: Decider, input: { email: unknown; username: unknown }) {
  const email = normalEmail(validate(Email, input.email, 'email'));
  const username = validate(Username, input.username, 'username');
  // The name is claimed in the statement that writes the person, and an invitation refused for its
  // email throws inside the transaction, so that it keeps no name.
  await sql.begin(async (tx) => {
    const [row] = await tx<{ id: string }[]>`
      with claimed as (${claimUsername(tx, username, 'person')})
      insert into people (email, username) select ${email}, username from claimed
      on conflict (email) do nothing
      returning id`;
    if (row) return recordDecision(tx, decider, { action: 'person.invite', subjectType: 'person', subject: username, after: { email, username } });
    if ((await usernameOwner(tx, username)) === 'agent') throw conflict(`An agent is already named ${username}; choose another username.`);
    const [invited] = await tx<{ invited: number }[]>`select 1 as invited from people where email = ${email}`;
    throw conflict(invited ? `${email} is already invited.` : `A person is already named ${username}; choose another username.`);
  });
  return { email, username };
}

// The code is hashed with its person's id, so equal codes of two people never share a hash.
const codeHash = (sql: TransactionSql, code: string) => sql`sha256(convert_to(p.id::text || ':' || ${code}, 'UTF8'))`;

type Limits = { perEmailAndClient: number; perEmail: number; perClient: number };

// Takes one slot of a rate limit, or throws 429 when the email from this client address, the
// email from any address or the client address for any email has used them all within the window.
// The count and the insert are one statement, serialised per email and per client address (locks
// taken in that order, in two lock spaces, so two attempts never wait on each other in a circle):
// concurrent attempts cannot overrun any of the counts.
async function takeSlot(
  tx: TransactionSql,
  kind: 'code_request' | 'wrong_code',
  email: string,
  client: string,
  limits: Limits,
  refusal: string,
): Promise<bigint> {
  await tx`select pg_advisory_xact_lock(1, hashtext(${email}))`;
  await tx`select pg_advisory_xact_lock(2, hashtext(${client}))`;
  const [row] = await tx<{ id: bigint | null }[]>`
    with recent as (
      select
        count(*) filter (where email = ${email} and client = ${client}) as by_email_and_client,
        count(*) filter (where email = ${email}) as by_email,
        count(*) filter (where client = ${client}) as by_client
      from sign_in_attempts
      where kind = ${kind} and attempted_at > now() - make_interval(mins => ${SIGN_IN.windowMinutes})
        and (email = ${email} or client = ${client})
    ), taken as (
      insert into sign_in_attempts (kind, email, client)
      select ${kind}, ${email}, ${client} from recent
      where by_email_and_client < ${limits.perEmailAndClient} and by_email < ${limits.perEmail} and by_client < ${limits.perClient}
      returning id
    )
    select (select id from taken) as id`;
  if (!row?.id) throw rateLimited(refusal);
  return row.id;
}

// Answers the same whether or not the address belongs to an invited person, so that nobody can
// learn who has an account; only an invited person is actually sent a code.
export async function requestSignInCode(sql: Sql, send: CodeSender, input: unknown, client: string) {
  const email = normalEmail(validate(CodeRequest, input).email);
  const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
  const person = await sql.begin(async (tx) => {
    await tx`delete from sign_in_attempts where attempted_at < now() - make_interval(mins => ${SIGN_IN.windowMinutes})`;
    await takeSlot(
      tx,
      'code_request',
      email,
      client,
      // Per email from any address, to bound the mail a stranger can send someone. Their requests
      // still email the person a working code (the latest), unlike wrong codes.
      {
        perEmailAndClient: SIGN_IN.codeRequestsPerEmail,
        perEmail: SIGN_IN.codeRequestsPerEmail,
        perClient: SIGN_IN.codeRequestsPerClient,
      },
      'Too many sign-in codes were requested; wait a few minutes and try again.',
    );
    // Asking again replaces the outstanding code.
    const [row] = await tx<{ email: string; username: string }[]>`
      with p as (select id, email, username from people where email = ${email}),
      code as (
        insert into sign_in_codes (person_id, code_hash, expires_at)
        select p.id, ${codeHash(tx, code)}, now() + make_interval(mins => ${SIGN_IN.codeTtlMinutes}) from p
        on conflict (person_id) do update
          set code_hash = excluded.code_hash, created_at = now(), expires_at = excluded.expires_at
        returning person_id
      )
      select p.email, p.username from p join code on code.person_id = p.id`;
    return row ?? null;
  });
  if (person) send(person, code);
  return { message: `If ${email} belongs to an invited person, a sign-in code is on its way. It is valid for ${SIGN_IN.codeTtlMinutes} minutes.` };
}

// Every check takes a wrong-code slot first and gives it back only when the code was right, so
// that a burst of parallel guesses is counted in full. A right code is used up by the check.
export async function verifySignInCode(sql: Sql, input: unknown, client: string, sessionTtlMs: number) {
  const body = validate(CodeCheck, input);
  const email = normalEmail(body.email);
  const code = body.code.trim();
  const token = randomBytes(32).toString('base64url');
  const person = await sql.begin(async (tx) => {
    const slot = await takeSlot(
      tx,
      'wrong_code',
      email,
      client,
      {
        perEmailAndClient: SIGN_IN.wrongCodesPerEmailAndClient,
        perEmail: SIGN_IN.wrongCodesPerEmail,
        perClient: SIGN_IN.wrongCodesPerClient,
      },
      'Too many wrong codes; wait a few minutes, then request a new code.',
    );
    const [row] = await tx<Person[]>`
      with used as (
        delete from sign_in_codes c using people p
        where c.person_id = p.id and p.email = ${email} and c.expires_at > now() and c.code_hash = ${codeHash(tx, code)}
        returning p.id, p.email, p.username
      ), session as (
        insert into sessions (token_hash, person_id, expires_at)
        select ${hashKey(token)}, id, now() + make_interval(secs => ${sessionTtlMs / 1000}) from used
      )
      select id, email, username from used`;
    if (row) await tx`delete from sign_in_attempts where id = ${slot}`;
    return row ?? null;
  });
  if (!person) throw invalid('That code is wrong or has expired; request a new one.');
  return { person: { email: person.email, username: person.username }, token, maxAgeSeconds: Math.floor(sessionTtlMs / 1000) };
}

// The person behind a session token, or null when it is unknown or has expired.
export async function sessionPerson(sql: Sql, token: string | undefined | null): Promise<Person | null> {
  if (!token) return null;
  const [row] = await sql<Person[]>`
    select p.id, p.email, p.username
    from sessions s join people p on p.id = s.person_id
    where s.token_hash = ${hashKey(token)} and s.expires_at > now()`;
  return row ?? null;
}

// How a session stopped admitting its person: past its expiry, or gone from the table (signed out,
// through this instance or another).
export type SessionEnd = 'expired' | 'signed-out';

const BYTEA_ARRAY = 1001; // PostgreSQL's type id for bytea[]

// Which of these session tokens no longer admit anyone, and why; one query however many there are.
export async function endedSessions(sql: Sql, tokens: string[]): Promise<Map<string, SessionEnd>> {
  const ended = new Map<string, SessionEnd>();
  if (tokens.length === 0) return ended;
  const hashed = tokens.map((token) => ({ token, hash: hashKey(token) }));
  const rows = await sql<{ token_hash: Buffer; live: boolean }[]>`
    select token_hash, expires_at > now() as live
    from sessions where token_hash = any(${sql.array(hashed.map((h) => h.hash), BYTEA_ARRAY)})`;
  const liveByHash = new Map(rows.map((row) => [Buffer.from(row.token_hash).toString('hex'), row.live]));
  for (const { token, hash } of hashed) {
    const live = liveByHash.get(hash.toString('hex'));
    if (live === undefined) ended.set(token, 'signed-out');
    else if (!live) ended.set(token, 'expired');
  }
  return ended;
}

// Expired sessions and sign-in codes are refused when used; this removes them, so that tables of
// people who never sign out or never enter their code do not grow for ever (run by the worker's
// crontab every hour).
// Where warnings about the service go: every person who runs it.
export async function everyPersonsEmail(sql: Sql): Promise<string[]> {
  return (await sql<{ email: string }[]>`select email from people order by email`).map((r) => r.email);
}

export async function sweepExpiredSignIns(sql: Sql): Promise<{ sessions: number; codes: number }> {
  const [row] = await sql<{ sessions: number; codes: number }[]>`
    with sessions_gone as (delete from sessions where expires_at <= now() returning 1),
    codes_gone as (delete from sign_in_codes where expires_at <= now() returning 1)
    select (select count(*)::int from sessions_gone) as sessions, (select count(*)::int from codes_gone) as codes`;
  return row!;
}

export async function endSession(sql: Sql, token: string | undefined | null) {
  if (token) await sql`delete from sessions where token_hash = ${hashKey(token)} or expires_at <= now()`;
  return { message: 'Signed out.' };
}
