-- An attempt log an operator can act on: what the handler answered (the first KiB of its body),
-- which headers went out, whether the attempt belongs to a person's resend, and whether its
-- outcome was never recorded (the worker stopped or lost the database mid-attempt). A delivery
-- between retries says when the next attempt is due.
alter table delivery_attempts
  add column resend smallint not null default 0,
  add column response_body text,
  add column request_headers jsonb,
  add column interrupted boolean not null default false;

alter table deliveries
  -- How many times a person resent it; its attempts carry the number (0: the original publish).
  add column resends smallint not null default 0,
  -- Set while a retry is queued: the delivery reads as retrying, not as a healthy Accepted.
  add column next_attempt_at timestamptz;

-- Open dashboards hear of a retry being scheduled or forgotten, as of any other change.
drop trigger deliveries_changed on deliveries;
create trigger deliveries_changed
  after update of step, failed_step, error, notified_at, delivered_at, fetched_at, acknowledged_at, next_attempt_at
  on deliveries for each row
  when (new.send_attempts <= old.send_attempts)
  execute function notify_delivery_change();
