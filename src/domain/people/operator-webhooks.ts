import type { PendingQuery, Row } from 'postgres';
import type { Queries, Sql } from '../../db/connect';
import { checkWebhookUrl, type WebhookUrlPolicy } from '../agents/webhook-url';
import { newSigningSecret } from '../agents/keys';
import { conflict, invalid, notFound } from '../shared/errors';
import { isId } from '../shared/ids';
import { iso } from '../shared/iso-time';
import { byPerson, recordDecision, type Decider, type DecidingPerson } from './audit';
import { NOTICE_FORMATS, type NoticeFormat } from './operator-notice-body';
import { queueOperatorNotice } from './operator-notices';

// Where operators are told what needs them (operator-notices.ts): webhooks people add on the
// dashboard (the secret shown once), and the one the environment sets (OPERATOR_WEBHOOK_URL, written
// at each start). Each keeps its own health from its attempts, shown on the Notifications page and
// counted in the metrics. People's changes are recorded in the audit trail.

// A bound that keeps one person from making every event cost a hundred requests.
export const OPERATOR_WEBHOOKS_MAX = 10;
// Attempts shown per webhook on its page.
export const RECENT_ATTEMPTS = 10;

export type OperatorWebhookState = 'untried' | 'healthy' | 'failing';

export type NoticeAttempt = {
  noticeId: string;
  event: string;
  attempt: number;
  attemptedAt: string;
  durationMs: number;
  status: number | null;
  error: string | null;
  responseBody: string | null;
  // What came of the notice so far: delivered, retrying (another attempt is queued) or gave up.
  outcome: 'delivered' | 'retrying' | 'gave_up';
};

export type OperatorWebhook = {
  id: string;
  url: string;
  format: NoticeFormat;
  source: 'dashboard' | 'environment';
  addedBy: string;
  addedAt: string;
  health: {
    state: OperatorWebhookState;
    lastSuccessAt: string | null;
    lastFailureAt: string | null;
    lastFailure: string | null;
    failingSince: string | null;
  };
  // Notices queued or being retried.
  pending: number;
  recentAttempts: NoticeAttempt[];
};

export type AddedOperatorWebhook = OperatorWebhook & { secret: string };

type WebhookRow = {
  id: string;
  url: string;
  format: NoticeFormat;
  source: 'dashboard' | 'environment';
  addedBy: string;
  addedAt: Date;
  lastSuccessAt: Date | null;
  lastFailureAt: Date | null;
  lastFailure: string | null;
  failingSince: Date | null;
  pending: number;
  attempts: (Omit<NoticeAttempt, 'attemptedAt'> & { attemptedAt: string })[] | null;
};

const stateOf = (r: Pick<WebhookRow, 'lastSuccessAt' | 'lastFailureAt' | 'failingSince'>): OperatorWebhookState =>
  r.failingSince ? 'failing' : r.lastSuccessAt ? 'healthy' : 'untried';

const toWebhook = (r: WebhookRow): OperatorWebhook => ({
  id: r.id,
  url: r.url,
  format: r.format,
  source: r.source,
  addedBy: r.addedBy,
  addedAt: r.addedAt.toISOString(),
  health: {
    state: stateOf(r),
    lastSuccessAt: iso(r.lastSuccessAt),
    lastFailureAt: iso(r.lastFailureAt),
    lastFailure: r.lastFailure,
    failingSince: iso(r.failingSince),
  },
  pending: r.pending,
  recentAttempts: (r.attempts ?? []).map((a) => ({ ...a, attemptedAt: iso(a.attemptedAt) })),
});

const read = (sql: Queries, where: PendingQuery<Row[]>) => sql<WebhookRow[]>`
  select w.id, w.url, w.format, w.source, w.added_by as "addedBy", w.added_at as "addedAt",
         w.last_success_at as "lastSuccessAt", w.last_failure_at as "lastFailureAt", w.last_failure as "lastFailure",
         w.failing_since as "failingSince",
         (select count(*)::int from operator_notices n
          where n.webhook_id = w.id and n.delivered_at is null and n.gave_up_at is null) as pending,
         (select json_agg(to_jsonb(a) - 'sort' order by a.sort desc) from (
            select x.id as sort, x.notice_id as "noticeId", n.event, x.attempt, x.attempted_at as "attemptedAt",
                   x.duration_ms as "durationMs", x.status, x.error, x.response_body as "responseBody",
                   case when n.delivered_at is not null and x.attempt = n.attempts then 'delivered'
                        when n.gave_up_at is not null and x.attempt = n.attempts then 'gave_up'
                        when x.status between 200 and 299 then 'delivered'
                        else 'retrying' end as outcome
            from operator_notice_attempts x join operator_notices n on n.id = x.notice_id
            where x.webhook_id = w.id order by x.id desc limit ${RECENT_ATTEMPTS}) a) as attempts
  from operator_webhooks w
  where ${where}
  order by w.added_at, w.id`;

export async function listOperatorWebhooks(sql: Sql): Promise<OperatorWebhook[]> {
  return (await read(sql, sql`true`)).map(toWebhook);
}

async function operatorWebhook(sql: Queries, id: string): Promise<OperatorWebhook> {
  const [row] = await read(sql, sql`w.id = ${id}`);
  if (!row) throw noSuchWebhook();
  return toWebhook(row);
}

const noSuchWebhook = () => notFound('No such operator webhook; it may have been removed.');

function checkFormat(raw: unknown): NoticeFormat {
  if (raw === undefined || raw === null || raw === '') return 'slack';
  if (typeof raw !== 'string' || !NOTICE_FORMATS.includes(raw as NoticeFormat)) {
    throw invalid(`format must be one of ${NOTICE_FORMATS.join(', ')}: slack for a Slack incoming webhook, json for a typed JSON event`, 'format');
  }
  return raw as NoticeFormat;
}

// Adds a webhook a person gave: its URL held to the rules for agents' webhooks, a new signing
// secret (answered only now), recorded in the audit trail. At most OPERATOR_WEBHOOKS_MAX, counted
// in the inserting statement.
export async function addOperatorWebhook(
  sql: Sql,
  person: DecidingPerson,
  input: { url: unknown; format: unknown },
  policy: WebhookUrlPolicy,
): Promise<AddedOperatorWebhook> {
  const format = checkFormat(input.format);
  if (typeof input.url !== 'string' || input.url === '') throw invalid('url is required: the address notices are posted to', 'url');
  const url = await checkWebhookUrl(input.url, policy, 'url');
  const secret = newSigningSecret();
  return sql.begin(async (tx) => {
    // One person adding at a time, so that two additions cannot pass the bound together.
    await tx`lock table operator_webhooks in share row exclusive mode`;
    const [row] = await tx<{ id: string }[]>`
      insert into operator_webhooks (url, format, secret, source, added_by)
      select ${url}, ${format}, ${secret}, 'dashboard', ${person.username}
      where (select count(*) from operator_webhooks) < ${OPERATOR_WEBHOOKS_MAX}
      returning id`;
    if (!row) throw conflict(`At most ${OPERATOR_WEBHOOKS_MAX} operator webhooks; remove one first.`);
    await recordDecision(tx, byPerson(person), { action: 'operator_webhook.add', subjectType: 'operator_webhook', subject: row.id, after: { url, format } });
    return { ...(await operatorWebhook(tx, row.id)), secret };
  });
}

export async function removeOperatorWebhook(sql: Sql, decider: Decider, id: string): Promise<{ id: string; removed: true }> {
  if (!isId(id)) throw noSuchWebhook();
  return sql.begin(async (tx) => {
    const [row] = await tx<{ url: string; format: string; source: string }[]>`
      select url, format, source from operator_webhooks where id = ${id} for update`;
    if (!row) throw noSuchWebhook();
    if (row.source === 'environment') throw conflict('This webhook is set by OPERATOR_WEBHOOK_URL; unset that variable and restart to remove it.');
    await tx`delete from operator_webhooks where id = ${id}`;
    await recordDecision(tx, decider, { action: 'operator_webhook.remove', subjectType: 'operator_webhook', subject: id, before: { url: row.url, format: row.format } });
    return { id, removed: true as const };
  });
}

// A test notice to one webhook, queued now and sent by the worker like any other.
export async function sendTestNotice(sql: Sql, requestedBy: string, id: string): Promise<{ id: string; queued: true }> {
  if (!isId(id)) throw noSuchWebhook();
  return sql.begin(async (tx) => {
    const [row] = await tx`select 1 from operator_webhooks where id = ${id}`;
    if (!row) throw noSuchWebhook();
    await queueOperatorNotice(tx, { event: 'test', requestedBy, at: new Date().toISOString() }, id);
    return { id, queued: true as const };
  });
}

export type EnvironmentWebhook = { url: string; secret: string; format: NoticeFormat };

// The environment's webhook as this start's settings say: written (its health kept when its URL and
// secret stay the same), or removed when none is set. Its URL is held to the outbound rules at each
// send, as an agent's is.
export async function syncEnvironmentWebhook(sql: Sql, hook: EnvironmentWebhook | null): Promise<void> {
  if (!hook) {
    await sql`delete from operator_webhooks where source = 'environment'`;
    return;
  }
  await sql`
    insert into operator_webhooks (url, format, secret, source, added_by)
    values (${hook.url}, ${hook.format}, ${hook.secret}, 'environment', 'environment')
    on conflict (source) where source = 'environment' do update set
      url = excluded.url, format = excluded.format, secret = excluded.secret,
      last_success_at = case when operator_webhooks.url = excluded.url then operator_webhooks.last_success_at end,
      last_failure_at = case when operator_webhooks.url = excluded.url then operator_webhooks.last_failure_at end,
      last_failure = case when operator_webhooks.url = excluded.url then operator_webhooks.last_failure end,
      failing_since = case when operator_webhooks.url = excluded.url then operator_webhooks.failing_since end`;
}

// Whether anybody is told on a webhook: without one, and without mail, nothing claims a notice.
export async function hasOperatorWebhooks(sql: Queries): Promise<boolean> {
  const [row] = await sql<{ any: boolean }[]>`select exists (select 1 from operator_webhooks) as any`;
  return row!.any;
}

// Operator webhooks by state, for the metrics' gauge.
export async function countOperatorWebhooks(sql: Queries): Promise<Record<OperatorWebhookState, number>> {
  const rows = await sql<{ state: OperatorWebhookState; n: number }[]>`
    select case when failing_since is not null then 'failing' when last_success_at is not null then 'healthy' else 'untried' end as state,
           count(*)::int as n
    from operator_webhooks group by 1`;
  const counts: Record<OperatorWebhookState, number> = { untried: 0, healthy: 0, failing: 0 };
  for (const r of rows) counts[r.state] = r.n;
  return counts;
}

// Notices (and their attempts) older than the attempt log's retention go with it.
export async function pruneOperatorNotices(sql: Queries, days: number): Promise<number> {
  const pruned = await sql`delete from operator_notices where created_at < now() - make_interval(days => ${days})`;
  return pruned.count;
}
