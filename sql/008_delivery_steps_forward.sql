-- A delivery's step moves only forward (Accepted → Notified → Delivered → Fetched, or Failed at the
-- step reached), whoever writes it: the domain, an operator's SQL, a future admin path. The one
-- step back is a person's resend, Failed → Accepted. From Failed a delivered report or a read
-- still move it on (the doorbell did arrive; the agent has the message).
create function deliveries_step_forward() returns trigger
language plpgsql as $$
begin
  if (old.step, new.step) in (
    ('accepted', 'notified'), ('accepted', 'delivered'), ('accepted', 'fetched'), ('accepted', 'failed'),
    ('notified', 'delivered'), ('notified', 'fetched'), ('notified', 'failed'),
    ('delivered', 'fetched'), ('delivered', 'failed'),
    ('failed', 'accepted'), ('failed', 'delivered'), ('failed', 'fetched')
  ) then
    return new;
  end if;
  raise exception 'A delivery step moves only forward: % to % refused.', old.step, new.step
    using errcode = 'check_violation';
end
$$;

create trigger deliveries_step_forward
  before update of step on deliveries
  for each row when (old.step is distinct from new.step)
  execute function deliveries_step_forward();
