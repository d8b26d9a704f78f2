import type { Task } from 'graphile-worker';
import type { Sql } from '../db/connect';
import { spell, sweepEndpointHealth, type HealthRule, type HealthTransition } from '../domain/agents/endpoint-health';
import { endpointReasons, endpointsBack, queueOperatorNotice, type EndpointReason, type OperatorNotice } from '../domain/people/operator-notices';
import { describeOutcome } from '../domain/deliveries/retry-policy';
import { everyPersonsEmail } from '../domain/people/people';
import type { Logger } from '../log';
import type { Mailer } from '../mailer';
import type { Metrics } from '../metrics';

export const ENDPOINT_HEALTH_TASK = 'endpoint_health';
// Every minute: a warning stage or the switch-off is at most a minute late.
export const ENDPOINT_HEALTH_CRON = `* * * * * ${ENDPOINT_HEALTH_TASK}`;

export type AlertDeps = { sql: Sql; log: Logger; metrics?: Metrics; mailer: Mailer | null; rule: HealthRule; publicUrl?: string };

// The crontab's task: asks the domain which failing webhooks reached a warning stage or the
// switch-off, then tells people: a log line and a metric for each, an email to every person where
// SMTP is set up, and a notice on every operator webhook, queued in the sweep's own transaction.
// Webhooks operators were told of that answer again are told as back.
export function endpointAlertsTask(deps: AlertDeps): Task {
  return async () => {
    for (const agent of await endpointsBack(deps.sql)) deps.log.info('webhook_endpoint_back', { agent });
    if (deps.rule.warnAfterMs.length === 0 && deps.rule.disableAfterMs === null) return;
    const transitions = await deps.sql.begin(async (tx) => {
      const found = await sweepEndpointHealth(tx, deps.rule);
      const reasons = await endpointReasons(tx, found.map((t) => t.agentId));
      for (const t of found) await queueOperatorNotice(tx, operatorNotice(t, reasons.get(t.agentId), deps.rule));
      return found;
    });
    if (transitions.length === 0) return;
    const people = deps.mailer ? await everyPersonsEmail(deps.sql) : [];
    for (const t of transitions) {
      deps.log.warn(LOG_EVENT[t.transition], {
        agent: t.username, url: t.url, stage: t.stage, failingSince: t.failingSince,
        lastFailure: describeOutcome({ status: t.lastFailureStatus, error: t.lastFailureError }),
      });
      deps.metrics?.endpointTransition(t.transition);
      for (const to of people) deps.mailer!({ to, ...alertMail(t, deps) }, `webhook_${t.transition}_mail`);
    }
  };
}

// Spelled out, so that each event can be found in the code by the name the logs carry.
const LOG_EVENT = { warned: 'webhook_endpoint_warned', disabled: 'webhook_endpoint_disabled' } as const;

function operatorNotice(t: HealthTransition, reason: EndpointReason | undefined, rule: HealthRule): OperatorNotice {
  const said = reason ?? { status: t.lastFailureStatus, error: t.lastFailureError, answer: null };
  if (t.transition === 'disabled') return { event: 'endpoint.switched_off', agent: t.username, url: t.url, failingSince: t.failingSince, reason: said };
  const switchesOffAt = rule.disableAfterMs === null ? null : new Date(Date.parse(t.failingSince) + rule.disableAfterMs).toISOString();
  return { event: 'endpoint.warned', agent: t.username, url: t.url, stage: t.stage, stages: rule.warnAfterMs.length, failingSince: t.failingSince, switchesOffAt, reason: said };
}

function alertMail(t: HealthTransition, { rule, publicUrl }: AlertDeps) {
  const failing = `${t.username}'s webhook (${t.url}) has answered no attempt with 2xx since ${t.failingSince}; the last attempt: ${describeOutcome({ status: t.lastFailureStatus, error: t.lastFailureError })}.`;
  const where = publicUrl ? `\n\n${new URL('/dashboard/agents', publicUrl)}` : '';
  if (t.transition === 'disabled') {
    return {
      subject: `Webhook switched off: ${t.username}`,
      text: `${failing}\n\nIt was switched off: no more doorbells go to it and the agent's messages wait in its inbox. Once the handler answers again, send it a test event and switch it back on from the Agents page.${where}\n`,
    };
  }
  const off = rule.disableAfterMs === null ? '' : ` Unless it answers, it will be switched off after ${spell(rule.disableAfterMs)} of failing.`;
  return {
    subject: `Webhook failing: ${t.username}`,
    text: `${failing}${off}${where}\n`,
  };
}
