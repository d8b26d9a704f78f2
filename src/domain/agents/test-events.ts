import type { Queries, Sql } from '../../db/connect';
import { addJobs } from '../../db/job-queue';
import { conflict, notFound } from '../shared/errors';
import { isId } from '../shared/ids';
import { iso } from '../shared/iso-time';
import { answeredOk, type AttemptOutcome } from '../deliveries/retry-policy';
import { webhookVersion } from '../deliveries/notify-jobs';
import { secretsOf, signingSecretColumns, type SecretColumns, type SigningSecrets } from './signing-secrets';
import { recordEndpointHealth } from './endpoint-health';

// A test event: a person asks, from the dashboard, that an agent's webhook be sent a `ping`, to see
// whether it answers (after fixing a handler, before switching it back on). The contract tells
// handlers to acknowledge events they do not know with 2xx and ignore them, so a ping is safe to
// send to any handler. It is signed like a doorbell, sent once by the worker (no retries: a person
// is watching and can send another), and counts in the endpoint's health like any attempt.
export const TEST_EVENT = 'ping';
export const TEST_EVENT_TASK = 'test_event';

export type TestEvent = {
  id: string;
  url: string;
  requestedBy: string;
  requestedAt: string;
  // Null while it is on its way.
  attemptedAt: string | null;
  durationMs: number | null;
  status: number | null;
  error: string | null;
  ok: boolean | null;
  responseBody: string | null;
  requestHeaders: Record<string, string> | null;
  responseHeaders: Record<string, string> | null;
};

type TestEventRow = Omit<TestEvent, 'requestedAt' | 'attemptedAt' | 'ok'> & { requestedAt: Date; attemptedAt: Date | null };

const toTestEvent = (r: TestEventRow): TestEvent => ({
  ...r,
  requestedAt: r.requestedAt.toISOString(),
  attemptedAt: iso(r.attemptedAt),
  ok: r.attemptedAt === null ? null : answeredOk(r.status),
});

const columns = (sql: Queries) => sql`
  e.id, e.url, e.requested_by as "requestedBy", e.requested_at as "requestedAt", e.attempted_at as "attemptedAt",
  e.duration_ms as "durationMs", e.status, e.error, e.response_body as "responseBody",
  e.request_headers as "requestHeaders", e.response_headers as "responseHeaders"`;

// A test event on its way longer than this never reached a worker (none ran, or it died): it is
// closed as never sent, so that it does not hold the agent's one place for a test event for good.
export const testEventGivenUpAfterMs = (webhookTimeoutMs: number) => webhookTimeoutMs + 60_000;

export const NEVER_SENT = 'Never sent: no worker took it in time. Is the worker running?';

// Queues a test event to the agent's current webhook (switched off or not: testing one that was
// switched off is the point). One per agent may be on its way at a time; the database refuses a
// second (endpoint_test_events_one_pending_idx).
export async function sendTestEvent(sql: Sql, username: string, requestedBy: string, webhookTimeoutMs: number): Promise<TestEvent> {
  try {
    return await sql.begin(async (tx) => {
      await tx`
        update endpoint_test_events e set attempted_at = now(), error = ${NEVER_SENT}
        from agents a
        where a.username = ${username} and e.agent_id = a.id and e.attempted_at is null
          and e.requested_at < now() - ${testEventGivenUpAfterMs(webhookTimeoutMs)} * interval '1 millisecond'`;
      const [agent] = await tx<{ hasWebhook: boolean }[]>`
        select webhook_url is not null as "hasWebhook" from agents where username = ${username}`;
      if (!agent) throw notFound(`No agent named ${username}.`);
      if (!agent.hasWebhook) throw conflict(`${username} has no webhook to send a test event to.`);
      const [row] = await tx<TestEventRow[]>`
        with e as (
          insert into endpoint_test_events (agent_id, url, webhook_version, requested_by)
          select id, webhook_url, ${webhookVersion(tx, 'agents')}, ${requestedBy} from agents where username = ${username}
          returning *
        ), job as (
          ${addJobs(tx, tx`e`, {
            task: TEST_EVENT_TASK,
            payload: tx`json_build_object('testEventId', e.id)`,
            runAt: tx`null::timestamptz`,
            maxAttempts: 1,
            key: tx`${TEST_EVENT_TASK + ':'} || e.id`,
          })}
        )
        select ${columns(tx)} from e where (select count(*) from job) > 0`;
      return toTestEvent(row!);
    });
  } catch (error) {
    if ((error as { constraint_name?: string }).constraint_name === 'endpoint_test_events_one_pending_idx') {
      throw conflict(`A test event to ${username}'s webhook is already on its way; its answer will show here.`);
    }
    throw error;
  }
}

// The newest test event of each of the given agents.
export async function latestTestEvents(sql: Queries, agentIds: string[]): Promise<Map<string, TestEvent>> {
  if (agentIds.length === 0) return new Map();
  const rows = await sql<(TestEventRow & { agentId: string })[]>`
    select a.id as "agentId", ${columns(sql)}
    from unnest(${agentIds}::uuid[]) as a(id)
    cross join lateral (
      select * from endpoint_test_events x where x.agent_id = a.id order by x.id desc limit 1
    ) e`;
  return new Map(rows.map(({ agentId, ...r }) => [agentId, toTestEvent(r)]));
}

export type TestEventToSend = {
  id: string;
  username: string;
  requestedBy: string;
  requestedAt: Date;
  endpoint: { agentId: string; webhookVersion: string; url: string };
  secrets: SigningSecrets;
};

// What the worker needs to send a test event, or null when there is nothing to send: it was
// already attempted, or the webhook was removed or saved again meanwhile (then it is closed as not
// sent, with that reason).
export async function testEventToSend(sql: Sql, id: string): Promise<TestEventToSend | null> {
  if (!isId(id)) return null;
  const [row] = await sql<(Omit<TestEventToSend, 'endpoint' | 'secrets'> & SecretColumns & { agentId: string; webhookVersion: string; url: string; current: boolean })[]>`
    select e.id, a.username, e.requested_by as "requestedBy", e.requested_at as "requestedAt", e.agent_id as "agentId",
           e.webhook_version as "webhookVersion", e.url, ${signingSecretColumns(sql, 'a')},
           a.webhook_url is not null and ${webhookVersion(sql, 'a')} = e.webhook_version as current
    from endpoint_test_events e join agents a on a.id = e.agent_id
    where e.id = ${id} and e.attempted_at is null`;
  if (!row) return null;
  if (!row.current) {
    await sql`
      update endpoint_test_events set attempted_at = now(), error = ${WEBHOOK_CHANGED}
      where id = ${id} and attempted_at is null`;
    return null;
  }
  const { agentId, webhookVersion: version, url, current: _, secret, previousSecret, previousSecretUntil, ...rest } = row;
  return { ...rest, endpoint: { agentId, webhookVersion: version, url }, secrets: secretsOf({ secret, previousSecret, previousSecretUntil }) };
}

export const WEBHOOK_CHANGED = 'Not sent: the webhook was removed or saved again before the test event went out.';

// The test event's one attempt, recorded with its endpoint's health in one statement.
export async function recordTestEvent(
  sql: Sql,
  event: TestEventToSend,
  attempt: { attemptedAt: Date; durationMs: number; outcome: AttemptOutcome },
): Promise<void> {
  const { outcome } = attempt;
  const input = sql.json([
    {
      id: event.id,
      agent_id: event.endpoint.agentId,
      webhook_version: event.endpoint.webhookVersion,
      attempted_at: attempt.attemptedAt.toISOString(),
      duration_ms: attempt.durationMs,
      ok: answeredOk(outcome.status),
      status: outcome.status,
      error: outcome.error,
      response_body: outcome.responseBody ?? null,
      request_headers: outcome.requestHeaders ?? null,
      response_headers: outcome.responseHeaders ?? null,
    },
  ]);
  await sql`
    with input as (
      select i.* from jsonb_to_recordset(${input}) as i(
        id uuid, agent_id uuid, webhook_version text, attempted_at timestamptz, duration_ms int, ok boolean, status int,
        error text, response_body text, request_headers jsonb, response_headers jsonb)
      join endpoint_test_events e on e.id = i.id and e.attempted_at is null
    ), ${recordEndpointHealth(sql, 'input')}
    update endpoint_test_events e set attempted_at = i.attempted_at, duration_ms = i.duration_ms, status = i.status,
      error = i.error, response_body = i.response_body, request_headers = i.request_headers, response_headers = i.response_headers
    from input i where e.id = i.id`;
}

// The body of a test event: like a doorbell's, an event name and data, never a message.
export function testEventBody(event: Pick<TestEventToSend, 'id' | 'username' | 'requestedBy' | 'requestedAt'>): string {
  return JSON.stringify({
    event: TEST_EVENT,
    data: { testEventId: event.id, agent: event.username, requestedBy: event.requestedBy, requestedAt: event.requestedAt.toISOString() },
  });
}
