-- Open dashboards hear when people's settings on a thread or an agent change, and when the loop
-- breaker pauses a thread (docs/guides/govern-agents.md), as they hear of its other changes
-- (sql/013): the thread page's switch and red banner, and the agent's Sending panel, stay live. Only
-- a change of value notifies, so that a statement that names the column without changing it (the
-- post path checking for a pause) costs nothing.

-- contract: a new trigger on new columns, which the previous release never writes.
create trigger threads_governance_changed
  after update of holds_messages, paused_at on threads for each row
  when (old.holds_messages is distinct from new.holds_messages or old.paused_at is distinct from new.paused_at)
  execute function notify_thread_listing();

-- contract: a new trigger on new columns, which the previous release never writes.
create trigger agents_governance_changed
  after update of contact_policy, holds_messages, messages_per_minute, threads_per_hour on agents for each row
  when (old.contact_policy is distinct from new.contact_policy or old.holds_messages is distinct from new.holds_messages
        or old.messages_per_minute is distinct from new.messages_per_minute or old.threads_per_hour is distinct from new.threads_per_hour)
  execute function notify_agent_listing();
