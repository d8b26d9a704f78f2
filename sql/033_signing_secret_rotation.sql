-- A webhook's signing secret rotated with a grace (src/domain/agents/signing-secrets.ts): the
-- secret it replaced still signs, beside the new one, until previous_signing_secret_until; after
-- that instant the signer leaves it out, so no job is needed to expire it. signing_secret_rotated_at
-- tells the worker's cache of secrets that the one it holds is stale (the webhook's version, and
-- with it the endpoint's health and its pending doorbells, stay as they are). The secrets stay
-- readable, as signing_secret is (sql/001_core.sql).
-- contract: new nullable columns, which the previous release never reads or writes.
alter table agents
  add column previous_signing_secret text,
  add column previous_signing_secret_until timestamptz,
  add column signing_secret_rotated_at timestamptz;

-- The dashboard's Agents page shows when the old secret stops, and hears of a rotation as of any
-- change to its listing.
-- contract: the previous release never writes this column, so none of its writes runs this trigger.
create trigger agents_signing_secret_rotated after update of signing_secret_rotated_at on agents
  for each row execute function notify_agent_listing();
