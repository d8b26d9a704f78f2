-- Idempotent sends (src/domain/idempotency.ts). A key is claimed by inserting its row in the same
-- transaction as what the request creates, so the two commit or vanish together; a concurrent
-- repeat waits on the row's unique index until the first commits, then reads its answer.
create table idempotency_keys (
  agent_id uuid not null references agents (id) on delete cascade,
  -- A key is the agent's own for each operation (open_thread, send_message).
  operation text not null,
  key text not null,
  -- What the request asked for, hashed: a repeat must ask for the same.
  fingerprint text not null,
  status smallint,
  -- json, not jsonb: a repeat answers the first answer as it was written, keys in their order.
  response json,
  created_at timestamptz not null default now(),
  primary key (agent_id, operation, key)
);
-- The hourly sweep deletes keys past their retention, oldest first.
create index idempotency_keys_created_idx on idempotency_keys (created_at);
