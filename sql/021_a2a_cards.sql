-- Whether an agent's A2A Agent Card (docs/a2a.md) is served to anyone who asks, the agent owner's
-- choice on the dashboard. Off by default: a card is then served only to callers with an agent key
-- of this service, so that a stranger cannot learn which agent names exist.
alter table agents add column a2a_card_listed boolean not null default false;

-- The dashboard's Agents page shows the choice, and hears of it as of any change to its listing.
-- contract: the previous release never writes this column, so none of its writes runs this trigger.
create trigger agents_card_listing_changed after update of a2a_card_listed on agents
  for each row execute function notify_agent_listing();
