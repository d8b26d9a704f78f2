import type { Queries, Sql } from '../../db/connect';
import { conflict, invalid, notFound } from '../shared/errors';
import { iso } from '../shared/iso-time';
import { checkStorableText } from '../shared/validate';
import { resendFailedSince, type BulkResend } from '../deliveries/delivery-steps';
import { answeredOk } from '../deliveries/retry-policy';
import { deciderName, recordDecision, type Decider } from '../people/audit';
import { queueOperatorNotice } from '../people/operator-notices';

// People stop and restart an agent's webhook. The service switches off a webhook that fails for
// days (endpoint-health.ts); a person pauses one by hand (a handler being deployed, a partner's
// outage) and resumes it, or switches back on one the service switched off. Both kinds of
// stopped webhook are one column, webhook_disabled_at, so that whether a doorbell is owed stays
// one rule (webhookActive): while it is set the agent polls, its URL and signing secret are kept,
// and test events still go out. What was accepted meanwhile waits in the inbox; doorbells that
// failed in the spell are resent only when the person asks.

export type PausedWebhook = { username: string; paused: true; pausedAt: string; pausedBy: string; reason: string | null };
export type SwitchedOn = BulkResend & { username: string };
export type EnabledWebhook = SwitchedOn & {
  enabled: true;
  // Whether the last test event since the switch-off answered 2xx; without one the person said so.
  passingTest: boolean;
};
export type ResumedWebhook = SwitchedOn & { resumed: true };

export const PAUSE_REASON_MAX = 500;

// The reason a person gives for a pause: optional, at most PAUSE_REASON_MAX characters, trimmed.
function pauseReason(raw: unknown): string | null {
  if (raw === undefined || raw === null) return null;
  if (typeof raw !== 'string' || raw.length > PAUSE_REASON_MAX) throw invalid(`reason must be text of at most ${PAUSE_REASON_MAX} characters`, 'reason');
  const reason = raw.trim();
  if (reason === '') return null;
  checkStorableText(reason, 'reason');
  return reason;
}

type Switch = {
  id: string;
  url: string | null;
  hasWebhook: boolean;
  disabledAt: Date | null;
  pausedBy: string | null;
  failingSince: Date | null;
};

// The agent's webhook as it stands, its row locked until the caller's transaction ends: a pause,
// a resume, a switch-off by the sweep and a save of another URL wait for one another. Not `for
// update`: the attempts recorded meanwhile (whose endpoint_health rows name the agent) need not wait.
async function lockedSwitch(tx: Queries, username: string): Promise<Switch> {
  const [row] = await tx<Switch[]>`
    select id, webhook_url as url, webhook_url is not null as "hasWebhook", webhook_disabled_at as "disabledAt", webhook_paused_by as "pausedBy",
           coalesce(webhook_failing_since, webhook_disabled_at) as "failingSince"
    from agents where username = ${username} for no key update`;
  if (!row) throw notFound(`No agent named ${username}.`);
  return row;
}

// A person pauses the webhook: no doorbell is owed from the commit on (a doorbell job that asks
// afterwards finds none, and one already on the wire is recorded as it ends, its retry not
// queued). The failing spell it was in, if any, is kept for a resend on resume.
export async function pauseWebhook(sql: Sql, decider: Decider, username: string, rawReason: unknown): Promise<PausedWebhook> {
  const reason = pauseReason(rawReason);
  return sql.begin(async (tx) => {
    const was = await lockedSwitch(tx, username);
    if (!was.hasWebhook) throw conflict(`${username} has no webhook to pause.`);
    if (was.disabledAt) {
      throw conflict(
        was.pausedBy
          ? `${username}'s webhook is already paused.`
          : `${username}'s webhook is already switched off by the service: no doorbells go to it.`,
      );
    }
    const [paused] = await tx<{ pausedAt: Date }[]>`
      update agents a set webhook_disabled_at = now(), webhook_disabled_reason = ${reason}, webhook_paused_by = ${deciderName(decider)},
                          webhook_failing_since = (select h.failing_since from endpoint_health h where h.agent_id = a.id)
      where a.id = ${was.id}
      returning a.webhook_disabled_at as "pausedAt"`;
    await recordDecision(tx, decider, {
      action: 'agent.webhook.pause',
      subjectType: 'agent',
      subject: username,
      before: { state: 'active' },
      after: { state: 'paused' },
      reason,
    });
    return { username, paused: true as const, pausedAt: paused!.pausedAt.toISOString(), pausedBy: deciderName(decider), reason };
  });
}

// Doorbells are owed again for what is accepted from now on. The failing spell is not reset: if it
// goes on, the sweep switches the webhook off again soon (endpoint-health.ts's probationMs). On
// request, every delivery to the agent whose doorbell failed in the spell (or, with none, since
// it was stopped) is resent by the bulk resend's rule. One transaction: switched on and resent, or
// neither.
async function switchOn(tx: Queries, was: Switch, resendFailed: boolean): Promise<BulkResend> {
  await tx`
    update agents set webhook_disabled_at = null, webhook_disabled_reason = null, webhook_paused_by = null,
                      webhook_failing_since = null, webhook_resumed_at = now()
    where id = ${was.id}`;
  return resendFailed ? resendFailedSince(tx, was.id, was.failingSince!) : { resent: 0, refused: [] };
}

export type LastTest = { requestedAt: string; attemptedAt: string | null; status: number | null; error: string | null; ok: boolean | null };

// The newest test event asked for since the webhook was stopped, or null.
async function lastTestSince(tx: Queries, agentId: string, since: Date): Promise<LastTest | null> {
  const [test] = await tx<{ requestedAt: Date; attemptedAt: Date | null; status: number | null; error: string | null }[]>`
    select requested_at as "requestedAt", attempted_at as "attemptedAt", status, error
    from endpoint_test_events where agent_id = ${agentId} and requested_at >= ${since}
    order by id desc limit 1`;
  if (!test) return null;
  return {
    requestedAt: test.requestedAt.toISOString(),
    attemptedAt: iso(test.attemptedAt),
    status: test.status,
    error: test.error,
    ok: test.attemptedAt ? answeredOk(test.status) : null,
  };
}

function untested(username: string, test: LastTest | null): string {
  const ask = 'send a test event, or switch it back on without a passing test';
  if (!test) return `No test event has been sent to ${username}'s webhook since it was switched off: ${ask}.`;
  if (!test.attemptedAt) return `The test event to ${username}'s webhook is still on its way: wait for its answer, or switch it back on without a passing test.`;
  const answer = test.status !== null ? `HTTP ${test.status}` : (test.error ?? 'no answer');
  return `The last test event to ${username}'s webhook since it was switched off was not answered with 2xx (${answer}): ${ask}.`;
}

// A person switches back on a webhook the service switched off. Unless the last test event since
// the switch-off answered 2xx, the person must say they mean it (`withoutPassingTest`): the
// endpoint is most likely still dead.
export async function enableWebhook(
  sql: Sql,
  decider: Decider,
  username: string,
  options: { resendFailed: boolean; withoutPassingTest: boolean },
): Promise<EnabledWebhook> {
  return sql.begin(async (tx) => {
    const was = await lockedSwitch(tx, username);
    if (was.disabledAt && was.pausedBy) throw conflict(`${username}'s webhook was paused by ${was.pausedBy}, not switched off: resume it instead.`);
    if (!was.disabledAt) throw conflict(`${username}'s webhook is not switched off.`);
    const test = await lastTestSince(tx, was.id, was.disabledAt);
    const passingTest = test?.ok === true;
    if (!passingTest && !options.withoutPassingTest) throw conflict(untested(username, test));
    const done = await switchOn(tx, was, options.resendFailed);
    // Operators were told it was switched off: they hear it is back, and who brought it back.
    await queueOperatorNotice(tx, {
      event: 'endpoint.back', agent: username, url: was.url!, how: 'switched_on', by: deciderName(decider), at: new Date().toISOString(),
    });
    await recordDecision(tx, decider, {
      action: 'agent.webhook.enable',
      subjectType: 'agent',
      subject: username,
      before: { switchedOff: true },
      after: { switchedOff: false, resent: done.resent, passingTest },
    });
    return { username, enabled: true as const, passingTest, ...done };
  });
}

// A person resumes a webhook paused by hand (by anyone). No test is asked for: the person who
// paused it knows why.
export async function resumeWebhook(sql: Sql, decider: Decider, username: string, options: { resendFailed: boolean }): Promise<ResumedWebhook> {
  return sql.begin(async (tx) => {
    const was = await lockedSwitch(tx, username);
    if (was.disabledAt && !was.pausedBy) throw conflict(`${username}'s webhook was switched off by the service, not paused: switch it back on instead.`);
    if (!was.disabledAt) throw conflict(`${username}'s webhook is not paused.`);
    const done = await switchOn(tx, was, options.resendFailed);
    await recordDecision(tx, decider, {
      action: 'agent.webhook.resume',
      subjectType: 'agent',
      subject: username,
      before: { state: 'paused', pausedBy: was.pausedBy },
      after: { state: 'active', resent: done.resent },
    });
    return { username, resumed: true as const, ...done };
  });
}
