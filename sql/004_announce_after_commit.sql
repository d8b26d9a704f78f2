-- A transaction that notifies holds PostgreSQL's cluster-wide notify lock through its commit, so
-- the two busiest writers announce their changes after they commit (src/domain/announce.ts)
-- instead of through these triggers: a post (new deliveries) and the webhook worker recording an
-- attempt (the attempt log and the send count move together). Every other change still notifies
-- from here, whoever makes it.
drop trigger delivery_attempts_added on delivery_attempts;
drop function notify_delivery_attempt();
drop trigger deliveries_changed on deliveries;
create trigger deliveries_changed
  after update of step, failed_step, error, notified_at, delivered_at, fetched_at, acknowledged_at
  on deliveries for each row
  when (new.send_attempts <= old.send_attempts)
  execute function notify_delivery_change();
