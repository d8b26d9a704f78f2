-- deliveries_recipient_page_idx (recipient_id, id), added for the dashboard, serves every lookup
-- by recipient that deliveries_recipient_message_idx (recipient_id, message_id) did, and
-- (message_id, recipient_id) serves a recipient's delivery of given messages: one index entry
-- less for every delivery a post writes.
drop index deliveries_recipient_message_idx;
