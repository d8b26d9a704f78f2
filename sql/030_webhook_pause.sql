-- People pause an agent's webhook by hand and resume it (docs/reference/webhooks.md, "Pausing by
-- hand"), through the machinery of the service's switch-off: a paused webhook has
-- webhook_disabled_at set, so that one rule (endpoint-health.ts's webhookActive) says whether a
-- doorbell is owed, and the previous release, reading the same column, owes none either.

-- webhook_paused_by: who paused it (a person's username, or `cli`); null when the service switched
-- it off. The reason a person gave is kept in webhook_disabled_reason.
-- webhook_resumed_at: when a person last switched it back on or resumed it. A failing spell that
-- began before then and goes on after it (a failure since) switches the webhook off again after
-- the first warning stage rather than after the whole switch-off spell (docs/internals/decisions.md).
alter table agents
  add column webhook_paused_by text,
  add column webhook_resumed_at timestamptz;
