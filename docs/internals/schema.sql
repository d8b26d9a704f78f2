-- The schema that the migrations in sql/ build, 001_core to 036_inbox_reads_the_delivery,
-- as PostgreSQL 18 holds it: schema public, written from its catalogs in pg_dump's style,
-- without owners or privileges (graphile-worker's own schema is the library's). For reading:
-- nothing applies this file. test/schema-snapshot.test.ts checks it; after adding a migration,
-- `bun run schema:snapshot` writes it again.

-- Extensions

CREATE EXTENSION pg_trgm WITH SCHEMA public VERSION '1.6';

CREATE EXTENSION unaccent WITH SCHEMA public VERSION '1.1';

-- Types

CREATE TYPE public.delivery_step AS ENUM (
    'accepted',
    'notified',
    'delivered',
    'fetched',
    'failed'
);

CREATE TYPE public.thread_state AS ENUM (
    'open',
    'close-pending',
    'closed'
);

-- Functions

CREATE OR REPLACE FUNCTION public.a2a_push_jobs(configs uuid[], run_at timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
begin
  if coalesce(array_length(configs, 1), 0) = 0 then return; end if;
  perform graphile_worker.add_jobs(array(
    select json_populate_record(null::graphile_worker.job_spec, json_build_object(
      'identifier', 'a2a_push', 'payload', json_build_object('configId', c), 'run_at', run_at,
      'max_attempts', 6, 'priority', 10, 'job_key', 'a2a_push:' || c))
    from unnest(configs) c));
end $function$;

CREATE OR REPLACE FUNCTION public.a2a_push_on_answer()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
declare
  configs uuid[];
begin
  with answered as (
    update a2a_push_configs c set answered = true
    from new_messages m
    where not c.answered and c.thread_id = m.thread_id and c.recipient_id = m.sender_agent_id and c.message_id < m.id
    returning c.id
  )
  select array_agg(distinct id) into configs from answered;
  perform a2a_push_jobs(configs);
  return null;
end $function$;

CREATE OR REPLACE FUNCTION public.a2a_push_on_step()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  perform a2a_push_jobs(array(select id from a2a_push_configs where delivery_id = new.id));
  return null;
end $function$;

CREATE OR REPLACE FUNCTION public.add_agent_profile()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  insert into agent_profiles (agent_id, username) select id, username from new_agents;
  return null;
end $function$;

CREATE OR REPLACE FUNCTION public.add_counts(a integer[], b integer[])
 RETURNS integer[]
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select array(select coalesce(x, 0) + coalesce(y, 0) from unnest(a, b) with ordinality as u(x, y, i) order by i)
$function$;

CREATE OR REPLACE FUNCTION public.agent_document(username text, display_name text, description text, tags text[])
 RETURNS tsvector
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select setweight(to_tsvector('ams_search'::regconfig, username || ' ' || coalesce(display_name, '')), 'A')
      || setweight(to_tsvector('ams_search'::regconfig, coalesce(array_to_string(tags, ' '), '')), 'B')
      || to_tsvector('ams_search'::regconfig, coalesce(description, ''))
$function$;

CREATE OR REPLACE FUNCTION public.agent_events_for_holds()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  if tg_op = 'UPDATE' and old.state = new.state then
    return null;
  end if;
  insert into agent_events (agent_id, type, message_id)
  select new.sender_agent_id, 'message.' || new.state, new.id
  from agents a where a.id = new.sender_agent_id and a.events_recorded_since is not null;
  if found then
    perform pg_notify('ams_events', new.sender_agent_id::text);
  end if;
  return null;
end $function$;

CREATE OR REPLACE FUNCTION public.agent_events_for_new_deliveries()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  insert into agent_events (agent_id, type, delivery_id)
  select d.recipient_id, 'message.created', d.id
  from added d join agents a on a.id = d.recipient_id
  where a.events_recorded_since is not null
  order by d.id;
  return null;
end $function$;

CREATE OR REPLACE FUNCTION public.agent_events_for_receipts()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
declare
  sender uuid;
begin
  select m.sender_agent_id into sender from messages m join agents a on a.id = m.sender_agent_id
  where m.id = new.message_id and a.events_recorded_since is not null;
  if sender is null then
    return null;
  end if;
  if old.delivered_at is null and new.delivered_at is not null then
    insert into agent_events (agent_id, type, delivery_id) values (sender, 'delivery.delivered', new.id);
  end if;
  if old.fetched_at is null and new.fetched_at is not null then
    insert into agent_events (agent_id, type, delivery_id) values (sender, 'delivery.fetched', new.id);
  end if;
  perform pg_notify('ams_events', sender::text);
  return null;
end $function$;

CREATE OR REPLACE FUNCTION public.agent_first_key()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  insert into agent_keys (agent_id, slot, name, key_hash, created_at)
  values (new.id, 1, 'initial', new.key_hash, new.created_at)
  on conflict do nothing;
  return null;
end $function$;

CREATE OR REPLACE FUNCTION public.agent_key_changed()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  if tg_op = 'DELETE' then
    update agents set key_hash = sha256(uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()))
    where id = old.agent_id and key_hash = old.key_hash;
  end if;
  perform pg_notify('ams_agents', old.agent_id::text);
  return null;
end $function$;

CREATE OR REPLACE FUNCTION public.deliveries_step_forward()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION public.file_usage_returned()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  if old.state = 'ready' then
    update file_usage set bytes = bytes - old.size where agent_id = old.uploader_id;
  end if;
  return null;
end $function$;

CREATE OR REPLACE FUNCTION public.index_new_messages()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  insert into message_search (message_id, thread_id, document)
  select m.id, m.thread_id, message_document(t.title, m.summary, m.content)
  from new_messages m join threads t on t.id = m.thread_id;
  return null;
end $function$;

CREATE OR REPLACE FUNCTION public.message_document(title text, summary text, content text)
 RETURNS tsvector
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select setweight(to_tsvector('ams_search'::regconfig, title), 'A')
      || setweight(to_tsvector('ams_search'::regconfig, coalesce(summary, '')), 'B')
      || to_tsvector('ams_search'::regconfig, content)
$function$;

CREATE OR REPLACE FUNCTION public.notify_agent_change()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  perform pg_notify('ams_agents', old.id::text);
  return null;
end
$function$;

CREATE OR REPLACE FUNCTION public.notify_agent_listing()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  perform pg_notify('ams_dashboard', 'agent:' || new.id::text);
  return null;
end
$function$;

CREATE OR REPLACE FUNCTION public.notify_connection_ended()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  perform pg_notify('ams_agents', old.agent_id::text);
  return null;
end $function$;

CREATE OR REPLACE FUNCTION public.notify_delivery_change()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  perform pg_notify('ams_delivery', new.id::text);
  return null;
end
$function$;

CREATE OR REPLACE FUNCTION public.notify_held_listing()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  perform pg_notify('ams_dashboard', 'thread:' || new.thread_id::text);
  return null;
end
$function$;

CREATE OR REPLACE FUNCTION public.notify_participant_listing()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  perform pg_notify('ams_dashboard', 'thread:' || coalesce(new.thread_id, old.thread_id)::text);
  return null;
end
$function$;

CREATE OR REPLACE FUNCTION public.notify_test_event()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  perform pg_notify('ams_dashboard', 'agent:' || new.agent_id::text);
  return null;
end
$function$;

CREATE OR REPLACE FUNCTION public.notify_thread_listing()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  perform pg_notify('ams_dashboard', 'thread:' || new.id::text);
  return null;
end
$function$;

CREATE OR REPLACE FUNCTION public.oauth_connection_changed()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  if tg_op = 'DELETE' then
    delete from oauth_artifacts where grant_id = old.grant_id;
  end if;
  perform pg_notify('ams_dashboard', 'agent:' || coalesce(new.agent_id, old.agent_id)::text);
  return null;
end
$function$;

CREATE OR REPLACE FUNCTION public.oauth_end_connections_of_archived()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  delete from oauth_connections where agent_id = new.id;
  return null;
end
$function$;

CREATE OR REPLACE FUNCTION public.operator_notice_jobs(notices uuid[], attempt integer, run_at timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
begin
  if coalesce(array_length(notices, 1), 0) = 0 then return; end if;
  perform graphile_worker.add_jobs(array(
    select json_populate_record(null::graphile_worker.job_spec, json_build_object(
      'identifier', 'operator_notice', 'payload', json_build_object('noticeId', n, 'attempt', attempt), 'run_at', run_at,
      'max_attempts', 5, 'job_key', 'operator_notice:' || n || ':' || attempt))
    from unnest(notices) n));
end $function$;

CREATE OR REPLACE FUNCTION public.queue_operator_notice(event text, notice jsonb, only_webhook uuid DEFAULT NULL::uuid)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
declare
  queued uuid[];
begin
  with n as (
    insert into operator_notices (webhook_id, event, notice)
    select w.id, event, notice from operator_webhooks w where only_webhook is null or w.id = only_webhook
    returning id
  )
  select array_agg(id) into queued from n;
  perform operator_notice_jobs(queued, 1);
  return coalesce(array_length(queued, 1), 0);
end $function$;

CREATE OR REPLACE FUNCTION public.uuid_v7()
 RETURNS uuid
 LANGUAGE sql
 PARALLEL SAFE
AS $function$select uuidv7()$function$;

-- Tables, each with its indexes and triggers

CREATE TABLE public.a2a_message_ids (
    message_id uuid NOT NULL,
    a2a_message_id text NOT NULL,
    CONSTRAINT a2a_message_ids_message_id_fkey FOREIGN KEY (message_id) REFERENCES public.messages(id) ON DELETE CASCADE,
    CONSTRAINT a2a_message_ids_pkey PRIMARY KEY (message_id)
);

CREATE TABLE public.a2a_push_configs (
    id uuid DEFAULT public.uuid_v7() NOT NULL,
    delivery_id uuid NOT NULL,
    owner_id uuid NOT NULL,
    thread_id uuid NOT NULL,
    recipient_id uuid NOT NULL,
    message_id uuid NOT NULL,
    name text NOT NULL,
    url text NOT NULL,
    token text DEFAULT ''::text NOT NULL,
    auth_scheme text DEFAULT ''::text NOT NULL,
    auth_credentials text DEFAULT ''::text NOT NULL,
    pushed text,
    answered boolean DEFAULT false NOT NULL,
    sending_until timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT a2a_push_configs_delivery_id_fkey FOREIGN KEY (delivery_id) REFERENCES public.deliveries(id) ON DELETE CASCADE,
    CONSTRAINT a2a_push_configs_delivery_id_name_key UNIQUE (delivery_id, name),
    CONSTRAINT a2a_push_configs_owner_id_fkey FOREIGN KEY (owner_id) REFERENCES public.agents(id) ON DELETE CASCADE,
    CONSTRAINT a2a_push_configs_pkey PRIMARY KEY (id)
);
CREATE INDEX a2a_push_configs_answer_idx ON public.a2a_push_configs USING btree (thread_id, recipient_id) WHERE (NOT answered);

CREATE TABLE public.agent_contacts (
    agent_id uuid NOT NULL,
    contact_id uuid NOT NULL,
    list text NOT NULL,
    added_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT agent_contacts_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES public.agents(id) ON DELETE CASCADE,
    CONSTRAINT agent_contacts_check CHECK ((agent_id <> contact_id)),
    CONSTRAINT agent_contacts_contact_id_fkey FOREIGN KEY (contact_id) REFERENCES public.agents(id) ON DELETE CASCADE,
    CONSTRAINT agent_contacts_list_check CHECK ((list = ANY (ARRAY['allow'::text, 'block'::text]))),
    CONSTRAINT agent_contacts_pkey PRIMARY KEY (agent_id, contact_id)
);
CREATE INDEX agent_contacts_contact_idx ON public.agent_contacts USING btree (contact_id);

CREATE TABLE public.agent_event_floors (
    agent_id uuid NOT NULL,
    xid xid8 NOT NULL,
    seq bigint NOT NULL,
    CONSTRAINT agent_event_floors_pkey PRIMARY KEY (agent_id)
);

CREATE TABLE public.agent_events (
    agent_id uuid NOT NULL,
    xid xid8 DEFAULT pg_current_xact_id() NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    type text NOT NULL,
    delivery_id uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    message_id uuid,
    CONSTRAINT agent_events_pkey PRIMARY KEY (agent_id, xid, seq),
    CONSTRAINT agent_events_type_check CHECK ((type = ANY (ARRAY['message.created'::text, 'delivery.delivered'::text, 'delivery.fetched'::text, 'message.held'::text, 'message.approved'::text, 'message.rejected'::text])))
);
CREATE INDEX agent_events_created_idx ON public.agent_events USING brin (created_at);

CREATE TABLE public.agent_keys (
    id uuid DEFAULT public.uuid_v7() NOT NULL,
    agent_id uuid NOT NULL,
    slot smallint NOT NULL,
    name text NOT NULL,
    key_hash bytea NOT NULL,
    prefix text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_used_at timestamp with time zone,
    expires_at timestamp with time zone,
    CONSTRAINT agent_keys_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES public.agents(id) ON DELETE CASCADE,
    CONSTRAINT agent_keys_agent_id_slot_key UNIQUE (agent_id, slot),
    CONSTRAINT agent_keys_key_hash_key UNIQUE (key_hash),
    CONSTRAINT agent_keys_name_check CHECK (((length(name) >= 1) AND (length(name) <= 64))),
    CONSTRAINT agent_keys_pkey PRIMARY KEY (id),
    CONSTRAINT agent_keys_slot_check CHECK (((slot >= 1) AND (slot <= 5)))
);
CREATE INDEX agent_keys_agent_idx ON public.agent_keys USING btree (agent_id);
CREATE TRIGGER agent_keys_changed AFTER DELETE OR UPDATE OF key_hash, expires_at, agent_id ON public.agent_keys FOR EACH ROW EXECUTE FUNCTION public.agent_key_changed();

CREATE TABLE public.agent_last_seen (
    agent_id uuid NOT NULL,
    last_seen_at timestamp with time zone NOT NULL,
    CONSTRAINT agent_last_seen_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES public.agents(id) ON DELETE CASCADE,
    CONSTRAINT agent_last_seen_pkey PRIMARY KEY (agent_id)
);

CREATE TABLE public.agent_profiles (
    agent_id uuid NOT NULL,
    username text NOT NULL,
    display_name text,
    description text,
    tags text[] DEFAULT '{}'::text[] NOT NULL,
    updated_at timestamp with time zone,
    document tsvector GENERATED ALWAYS AS (public.agent_document(username, display_name, description, tags)) STORED NOT NULL,
    CONSTRAINT agent_profiles_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES public.agents(id) ON DELETE CASCADE,
    CONSTRAINT agent_profiles_description_check CHECK ((char_length(description) <= 2000)),
    CONSTRAINT agent_profiles_display_name_check CHECK (((char_length(display_name) >= 1) AND (char_length(display_name) <= 100))),
    CONSTRAINT agent_profiles_pkey PRIMARY KEY (agent_id),
    CONSTRAINT agent_profiles_tags_check CHECK ((cardinality(tags) <= 20))
);
CREATE INDEX agent_profiles_document_idx ON public.agent_profiles USING gin (document);
CREATE INDEX agent_profiles_tags_idx ON public.agent_profiles USING gin (tags);

CREATE TABLE public.agents (
    id uuid DEFAULT public.uuid_v7() NOT NULL,
    username text NOT NULL,
    key_hash bytea NOT NULL,
    archived_at timestamp with time zone,
    webhook_url text,
    signing_secret text,
    webhook_set_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    username_owner text GENERATED ALWAYS AS ('agent'::text) STORED NOT NULL,
    webhook_disabled_at timestamp with time zone,
    webhook_disabled_reason text,
    webhook_failing_since timestamp with time zone,
    events_recorded_since timestamp with time zone,
    a2a_card_listed boolean DEFAULT false NOT NULL,
    contact_policy text DEFAULT 'open'::text NOT NULL,
    holds_messages boolean DEFAULT false NOT NULL,
    messages_per_minute integer,
    threads_per_hour integer,
    webhook_paused_by text,
    webhook_resumed_at timestamp with time zone,
    previous_signing_secret text,
    previous_signing_secret_until timestamp with time zone,
    signing_secret_rotated_at timestamp with time zone,
    CONSTRAINT agents_check CHECK (((webhook_url IS NULL) = (signing_secret IS NULL))),
    CONSTRAINT agents_contact_policy_check CHECK ((contact_policy = ANY (ARRAY['open'::text, 'contacts'::text, 'closed'::text]))),
    CONSTRAINT agents_key_hash_key UNIQUE (key_hash),
    CONSTRAINT agents_messages_per_minute_check CHECK ((messages_per_minute > 0)),
    CONSTRAINT agents_pkey PRIMARY KEY (id),
    CONSTRAINT agents_threads_per_hour_check CHECK ((threads_per_hour > 0)),
    CONSTRAINT agents_username_key UNIQUE (username),
    CONSTRAINT agents_username_username_owner_fkey FOREIGN KEY (username, username_owner) REFERENCES public.usernames(username, owner)
);
CREATE TRIGGER agents_archived_end_oauth_connections AFTER UPDATE OF archived_at ON public.agents FOR EACH ROW WHEN (((new.archived_at IS NOT NULL) AND (old.archived_at IS NULL))) EXECUTE FUNCTION public.oauth_end_connections_of_archived();
CREATE TRIGGER agents_card_listing_changed AFTER UPDATE OF a2a_card_listed ON public.agents FOR EACH ROW EXECUTE FUNCTION public.notify_agent_listing();
CREATE TRIGGER agents_deleted AFTER DELETE ON public.agents FOR EACH ROW EXECUTE FUNCTION public.notify_agent_change();
CREATE TRIGGER agents_first_key AFTER INSERT ON public.agents FOR EACH ROW EXECUTE FUNCTION public.agent_first_key();
CREATE TRIGGER agents_governance_changed AFTER UPDATE OF contact_policy, holds_messages, messages_per_minute, threads_per_hour ON public.agents FOR EACH ROW WHEN (((old.contact_policy IS DISTINCT FROM new.contact_policy) OR (old.holds_messages IS DISTINCT FROM new.holds_messages) OR (old.messages_per_minute IS DISTINCT FROM new.messages_per_minute) OR (old.threads_per_hour IS DISTINCT FROM new.threads_per_hour))) EXECUTE FUNCTION public.notify_agent_listing();
CREATE TRIGGER agents_key_answer_changed AFTER UPDATE OF archived_at, key_hash, username ON public.agents FOR EACH ROW WHEN ((((old.archived_at IS NULL) <> (new.archived_at IS NULL)) OR (old.key_hash <> new.key_hash) OR (old.username <> new.username))) EXECUTE FUNCTION public.notify_agent_change();
CREATE TRIGGER agents_listing_changed AFTER INSERT OR UPDATE OF archived_at, webhook_url, webhook_disabled_at ON public.agents FOR EACH ROW EXECUTE FUNCTION public.notify_agent_listing();
CREATE TRIGGER agents_profile_row AFTER INSERT ON public.agents REFERENCING NEW TABLE AS new_agents FOR EACH STATEMENT EXECUTE FUNCTION public.add_agent_profile();
CREATE TRIGGER agents_signing_secret_rotated AFTER UPDATE OF signing_secret_rotated_at ON public.agents FOR EACH ROW EXECUTE FUNCTION public.notify_agent_listing();

CREATE TABLE public.audit_events (
    id uuid DEFAULT public.uuid_v7() NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    person_id uuid,
    actor text NOT NULL,
    action text NOT NULL,
    subject_type text NOT NULL,
    subject text NOT NULL,
    before jsonb,
    after jsonb,
    reason text,
    CONSTRAINT audit_events_person_id_fkey FOREIGN KEY (person_id) REFERENCES public.people(id) ON DELETE SET NULL,
    CONSTRAINT audit_events_pkey PRIMARY KEY (id),
    CONSTRAINT audit_events_subject_type_check CHECK ((subject_type = ANY (ARRAY['agent'::text, 'thread'::text, 'message'::text, 'delivery'::text, 'person'::text, 'operator_webhook'::text])))
);
CREATE INDEX audit_events_action_idx ON public.audit_events USING btree (action, id);
CREATE INDEX audit_events_at_idx ON public.audit_events USING btree (at);
CREATE INDEX audit_events_subject_idx ON public.audit_events USING btree (subject_type, subject, id);

CREATE TABLE public.deliveries (
    id uuid DEFAULT public.uuid_v7() NOT NULL,
    message_id uuid NOT NULL,
    thread_id uuid NOT NULL,
    recipient_id uuid NOT NULL,
    step public.delivery_step DEFAULT 'accepted'::public.delivery_step NOT NULL,
    failed_step public.delivery_step,
    error text,
    webhook boolean NOT NULL,
    publish_attempts smallint DEFAULT 0 NOT NULL,
    send_attempts smallint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    notified_at timestamp with time zone,
    delivered_at timestamp with time zone,
    fetched_at timestamp with time zone,
    acknowledged_at timestamp with time zone,
    resends smallint DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone,
    sender text,
    summary text,
    carries_files boolean,
    CONSTRAINT deliveries_check CHECK (((step = 'failed'::public.delivery_step) = (failed_step IS NOT NULL))),
    CONSTRAINT deliveries_message_id_fkey FOREIGN KEY (message_id) REFERENCES public.messages(id) ON DELETE CASCADE,
    CONSTRAINT deliveries_message_id_recipient_id_key UNIQUE (message_id, recipient_id),
    CONSTRAINT deliveries_pkey PRIMARY KEY (id),
    CONSTRAINT deliveries_recipient_id_fkey FOREIGN KEY (recipient_id) REFERENCES public.agents(id)
);
CREATE INDEX deliveries_awaiting_report_idx ON public.deliveries USING btree (notified_at, id) WHERE ((step = 'notified'::public.delivery_step) AND (delivered_at IS NULL));
CREATE INDEX deliveries_failed_idx ON public.deliveries USING btree (id) WHERE (step = 'failed'::public.delivery_step);
CREATE INDEX deliveries_inbox_idx ON public.deliveries USING btree (recipient_id, id) WHERE (acknowledged_at IS NULL);
CREATE INDEX deliveries_owed_idx ON public.deliveries USING btree (created_at) WHERE (webhook AND (step = 'accepted'::public.delivery_step));
CREATE INDEX deliveries_recipient_page_idx ON public.deliveries USING btree (recipient_id, id);
CREATE INDEX deliveries_retrying_idx ON public.deliveries USING btree (id) WHERE ((step = 'accepted'::public.delivery_step) AND (next_attempt_at IS NOT NULL));
CREATE INDEX deliveries_thread_page_idx ON public.deliveries USING btree (thread_id, id);
CREATE TRIGGER deliveries_a2a_push AFTER UPDATE OF step ON public.deliveries FOR EACH ROW WHEN ((old.step IS DISTINCT FROM new.step)) EXECUTE FUNCTION public.a2a_push_on_step();
CREATE TRIGGER deliveries_added_events AFTER INSERT ON public.deliveries REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION public.agent_events_for_new_deliveries();
CREATE TRIGGER deliveries_changed AFTER UPDATE OF step, failed_step, error, notified_at, delivered_at, fetched_at, acknowledged_at, next_attempt_at ON public.deliveries FOR EACH ROW WHEN ((new.send_attempts <= old.send_attempts)) EXECUTE FUNCTION public.notify_delivery_change();
CREATE TRIGGER deliveries_receipt_events AFTER UPDATE OF delivered_at, fetched_at ON public.deliveries FOR EACH ROW WHEN ((((old.delivered_at IS NULL) AND (new.delivered_at IS NOT NULL)) OR ((old.fetched_at IS NULL) AND (new.fetched_at IS NOT NULL)))) EXECUTE FUNCTION public.agent_events_for_receipts();
CREATE TRIGGER deliveries_step_forward BEFORE UPDATE OF step ON public.deliveries FOR EACH ROW WHEN ((old.step IS DISTINCT FROM new.step)) EXECUTE FUNCTION public.deliveries_step_forward();

CREATE TABLE public.delivery_attempts (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    delivery_id uuid NOT NULL,
    publish smallint NOT NULL,
    attempt smallint NOT NULL,
    attempted_at timestamp with time zone DEFAULT now() NOT NULL,
    duration_ms integer NOT NULL,
    status integer,
    error text,
    resend smallint DEFAULT 0 NOT NULL,
    response_body text,
    request_headers jsonb,
    interrupted boolean DEFAULT false NOT NULL,
    url text,
    response_headers jsonb,
    CONSTRAINT delivery_attempts_delivery_id_fkey FOREIGN KEY (delivery_id) REFERENCES public.deliveries(id) ON DELETE CASCADE,
    CONSTRAINT delivery_attempts_pkey PRIMARY KEY (id)
);
CREATE INDEX delivery_attempts_delivery_idx ON public.delivery_attempts USING btree (delivery_id, id);

CREATE TABLE public.endpoint_attempt_windows (
    agent_id uuid NOT NULL,
    window_start timestamp with time zone NOT NULL,
    attempts integer NOT NULL,
    successes integer NOT NULL,
    latency_buckets integer[] NOT NULL,
    timed integer DEFAULT 0 NOT NULL,
    sum_ms bigint DEFAULT 0 NOT NULL,
    max_ms integer,
    CONSTRAINT endpoint_attempt_windows_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES public.agents(id) ON DELETE CASCADE,
    CONSTRAINT endpoint_attempt_windows_pkey PRIMARY KEY (agent_id, window_start)
);

CREATE TABLE public.endpoint_health (
    agent_id uuid NOT NULL,
    last_success_at timestamp with time zone,
    last_failure_at timestamp with time zone,
    last_failure_status integer,
    last_failure_error text,
    consecutive_failures integer DEFAULT 0 NOT NULL,
    failing_since timestamp with time zone,
    warned_stage smallint DEFAULT 0 NOT NULL,
    recent_ms integer[] DEFAULT '{}'::integer[] NOT NULL,
    recent_at timestamp with time zone[] DEFAULT '{}'::timestamp with time zone[] NOT NULL,
    warned_at timestamp with time zone,
    last_failure_body text,
    CONSTRAINT endpoint_health_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES public.agents(id) ON DELETE CASCADE,
    CONSTRAINT endpoint_health_check CHECK (((failing_since IS NULL) = (consecutive_failures = 0))),
    CONSTRAINT endpoint_health_pkey PRIMARY KEY (agent_id)
);
CREATE INDEX endpoint_health_failing_idx ON public.endpoint_health USING btree (failing_since) WHERE (failing_since IS NOT NULL);

CREATE TABLE public.endpoint_test_events (
    id uuid DEFAULT public.uuid_v7() NOT NULL,
    agent_id uuid NOT NULL,
    url text NOT NULL,
    webhook_version text NOT NULL,
    requested_by text NOT NULL,
    requested_at timestamp with time zone DEFAULT now() NOT NULL,
    attempted_at timestamp with time zone,
    duration_ms integer,
    status integer,
    error text,
    response_body text,
    request_headers jsonb,
    response_headers jsonb,
    CONSTRAINT endpoint_test_events_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES public.agents(id) ON DELETE CASCADE,
    CONSTRAINT endpoint_test_events_pkey PRIMARY KEY (id)
);
CREATE INDEX endpoint_test_events_agent_idx ON public.endpoint_test_events USING btree (agent_id, id);
CREATE UNIQUE INDEX endpoint_test_events_one_pending_idx ON public.endpoint_test_events USING btree (agent_id) WHERE (attempted_at IS NULL);
CREATE TRIGGER endpoint_test_events_changed AFTER INSERT OR UPDATE OF attempted_at ON public.endpoint_test_events FOR EACH ROW EXECUTE FUNCTION public.notify_test_event();

CREATE TABLE public.file_chunks (
    file_id uuid NOT NULL,
    n integer NOT NULL,
    data bytea NOT NULL,
    CONSTRAINT file_chunks_file_id_fkey FOREIGN KEY (file_id) REFERENCES public.files(id) ON DELETE CASCADE,
    CONSTRAINT file_chunks_n_check CHECK ((n >= 0)),
    CONSTRAINT file_chunks_pkey PRIMARY KEY (file_id, n)
);

CREATE TABLE public.file_usage (
    agent_id uuid NOT NULL,
    bytes bigint DEFAULT 0 NOT NULL,
    CONSTRAINT file_usage_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES public.agents(id) ON DELETE CASCADE,
    CONSTRAINT file_usage_bytes_check CHECK ((bytes >= 0)),
    CONSTRAINT file_usage_pkey PRIMARY KEY (agent_id)
);

CREATE TABLE public.files (
    id uuid DEFAULT public.uuid_v7() NOT NULL,
    uploader_id uuid NOT NULL,
    name text NOT NULL,
    content_type text NOT NULL,
    size bigint DEFAULT 0 NOT NULL,
    sha256 bytea,
    state text DEFAULT 'pending'::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    attached_at timestamp with time zone,
    CONSTRAINT files_check CHECK (((state = 'ready'::text) = (sha256 IS NOT NULL))),
    CONSTRAINT files_pkey PRIMARY KEY (id),
    CONSTRAINT files_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'ready'::text]))),
    CONSTRAINT files_uploader_id_fkey FOREIGN KEY (uploader_id) REFERENCES public.agents(id) ON DELETE CASCADE
);
CREATE INDEX files_unattached_idx ON public.files USING btree (created_at) WHERE (attached_at IS NULL);
CREATE INDEX files_uploader_idx ON public.files USING btree (uploader_id, id);
CREATE TRIGGER files_usage_returned AFTER DELETE ON public.files FOR EACH ROW EXECUTE FUNCTION public.file_usage_returned();

CREATE TABLE public.held_messages (
    id uuid NOT NULL,
    thread_id uuid NOT NULL,
    sender_agent_id uuid NOT NULL,
    sender text NOT NULL,
    content text NOT NULL,
    summary text,
    reason text NOT NULL,
    state text DEFAULT 'held'::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    decided_at timestamp with time zone,
    decided_by uuid,
    decided_by_name text,
    rejection_reason text,
    noticed_at timestamp with time zone,
    file_ids uuid[],
    CONSTRAINT held_messages_check CHECK (((state = 'held'::text) = (decided_at IS NULL))),
    CONSTRAINT held_messages_check1 CHECK (((state = 'rejected'::text) = (rejection_reason IS NOT NULL))),
    CONSTRAINT held_messages_decided_by_fkey FOREIGN KEY (decided_by) REFERENCES public.people(id) ON DELETE SET NULL,
    CONSTRAINT held_messages_pkey PRIMARY KEY (id),
    CONSTRAINT held_messages_reason_check CHECK ((reason = ANY (ARRAY['agent'::text, 'thread'::text, 'loop'::text]))),
    CONSTRAINT held_messages_sender_agent_id_fkey FOREIGN KEY (sender_agent_id) REFERENCES public.agents(id) ON DELETE CASCADE,
    CONSTRAINT held_messages_state_check CHECK ((state = ANY (ARRAY['held'::text, 'approved'::text, 'rejected'::text]))),
    CONSTRAINT held_messages_thread_id_fkey FOREIGN KEY (thread_id) REFERENCES public.threads(id) ON DELETE CASCADE
);
CREATE INDEX held_messages_sender_idx ON public.held_messages USING btree (sender_agent_id, id);
CREATE INDEX held_messages_thread_idx ON public.held_messages USING btree (thread_id, id);
CREATE INDEX held_messages_unnoticed_idx ON public.held_messages USING btree (id) WHERE ((state = 'held'::text) AND (noticed_at IS NULL));
CREATE INDEX held_messages_waiting_idx ON public.held_messages USING btree (expires_at) WHERE (state = 'held'::text);
CREATE TRIGGER held_messages_events AFTER INSERT OR UPDATE OF state ON public.held_messages FOR EACH ROW EXECUTE FUNCTION public.agent_events_for_holds();
CREATE TRIGGER held_messages_listing_changed AFTER INSERT OR UPDATE OF state ON public.held_messages FOR EACH ROW EXECUTE FUNCTION public.notify_held_listing();

CREATE TABLE public.hold_links (
    token_hash bytea NOT NULL,
    message_id uuid NOT NULL,
    person_id uuid NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    used_at timestamp with time zone,
    CONSTRAINT hold_links_message_id_fkey FOREIGN KEY (message_id) REFERENCES public.held_messages(id) ON DELETE CASCADE,
    CONSTRAINT hold_links_person_id_fkey FOREIGN KEY (person_id) REFERENCES public.people(id) ON DELETE CASCADE,
    CONSTRAINT hold_links_pkey PRIMARY KEY (token_hash)
);
CREATE INDEX hold_links_expiry_idx ON public.hold_links USING btree (expires_at);
CREATE INDEX hold_links_message_idx ON public.hold_links USING btree (message_id);

CREATE TABLE public.hold_notices (
    kind text NOT NULL,
    sent_at timestamp with time zone NOT NULL,
    CONSTRAINT hold_notices_kind_check CHECK ((kind = 'waiting'::text)),
    CONSTRAINT hold_notices_pkey PRIMARY KEY (kind)
);

CREATE TABLE public.idempotency_keys (
    agent_id uuid NOT NULL,
    operation text NOT NULL,
    key text NOT NULL,
    fingerprint text NOT NULL,
    status smallint,
    response json,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT idempotency_keys_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES public.agents(id) ON DELETE CASCADE,
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (agent_id, operation, key)
);
CREATE INDEX idempotency_keys_created_idx ON public.idempotency_keys USING btree (created_at);

CREATE TABLE public.message_files (
    message_id uuid NOT NULL,
    file_id uuid NOT NULL,
    thread_id uuid NOT NULL,
    "position" smallint NOT NULL,
    CONSTRAINT message_files_file_id_fkey FOREIGN KEY (file_id) REFERENCES public.files(id),
    CONSTRAINT message_files_message_id_fkey FOREIGN KEY (message_id) REFERENCES public.messages(id) ON DELETE CASCADE,
    CONSTRAINT message_files_pkey PRIMARY KEY (message_id, file_id)
);
CREATE INDEX message_files_file_idx ON public.message_files USING btree (file_id, thread_id);

CREATE TABLE public.message_search (
    message_id uuid NOT NULL,
    thread_id uuid NOT NULL,
    document tsvector NOT NULL,
    CONSTRAINT message_search_message_id_fkey FOREIGN KEY (message_id) REFERENCES public.messages(id) ON DELETE CASCADE,
    CONSTRAINT message_search_pkey PRIMARY KEY (message_id)
);
CREATE INDEX message_search_document_idx ON public.message_search USING gin (document);
CREATE INDEX message_search_thread_idx ON public.message_search USING btree (thread_id);

CREATE TABLE public.message_search_backfill (
    singleton boolean DEFAULT true NOT NULL,
    up_to uuid,
    indexed_through uuid,
    done_at timestamp with time zone,
    CONSTRAINT message_search_backfill_pkey PRIMARY KEY (singleton),
    CONSTRAINT message_search_backfill_singleton_check CHECK (singleton)
);

CREATE TABLE public.messages (
    id uuid DEFAULT public.uuid_v7() NOT NULL,
    thread_id uuid NOT NULL,
    sender_agent_id uuid,
    sender text NOT NULL,
    content text NOT NULL,
    summary text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT messages_pkey PRIMARY KEY (id),
    CONSTRAINT messages_sender_agent_id_fkey FOREIGN KEY (sender_agent_id) REFERENCES public.agents(id),
    CONSTRAINT messages_thread_id_fkey FOREIGN KEY (thread_id) REFERENCES public.threads(id) ON DELETE CASCADE
);
CREATE INDEX messages_thread_idx ON public.messages USING btree (thread_id, id);
CREATE TRIGGER messages_a2a_push AFTER INSERT ON public.messages REFERENCING NEW TABLE AS new_messages FOR EACH STATEMENT EXECUTE FUNCTION public.a2a_push_on_answer();
CREATE TRIGGER messages_search_index AFTER INSERT ON public.messages REFERENCING NEW TABLE AS new_messages FOR EACH STATEMENT EXECUTE FUNCTION public.index_new_messages();

CREATE TABLE public.oauth_artifacts (
    model text NOT NULL,
    id_hash bytea NOT NULL,
    payload jsonb NOT NULL,
    grant_id text,
    uid_hash bytea,
    expires_at timestamp with time zone,
    CONSTRAINT oauth_artifacts_pkey PRIMARY KEY (model, id_hash)
);
CREATE INDEX oauth_artifacts_expiry_idx ON public.oauth_artifacts USING btree (expires_at) WHERE (expires_at IS NOT NULL);
CREATE INDEX oauth_artifacts_grant_idx ON public.oauth_artifacts USING btree (grant_id) WHERE (grant_id IS NOT NULL);
CREATE INDEX oauth_artifacts_uid_idx ON public.oauth_artifacts USING btree (uid_hash) WHERE (uid_hash IS NOT NULL);

CREATE TABLE public.oauth_connections (
    grant_id text NOT NULL,
    agent_id uuid NOT NULL,
    client_id text NOT NULL,
    client_name text,
    client_uri text,
    approved_by uuid,
    approved_at timestamp with time zone DEFAULT now() NOT NULL,
    last_used_at timestamp with time zone,
    CONSTRAINT oauth_connections_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES public.agents(id) ON DELETE CASCADE,
    CONSTRAINT oauth_connections_approved_by_fkey FOREIGN KEY (approved_by) REFERENCES public.people(id) ON DELETE SET NULL,
    CONSTRAINT oauth_connections_pkey PRIMARY KEY (grant_id)
);
CREATE INDEX oauth_connections_agent_idx ON public.oauth_connections USING btree (agent_id, approved_at DESC);
CREATE TRIGGER oauth_connections_changed AFTER INSERT OR DELETE OR UPDATE OF last_used_at ON public.oauth_connections FOR EACH ROW EXECUTE FUNCTION public.oauth_connection_changed();
CREATE TRIGGER oauth_connections_ended AFTER DELETE ON public.oauth_connections FOR EACH ROW EXECUTE FUNCTION public.notify_connection_ended();

CREATE TABLE public.oauth_keys (
    singleton boolean DEFAULT true NOT NULL,
    jwks jsonb NOT NULL,
    cookie_keys text[] NOT NULL,
    CONSTRAINT oauth_keys_pkey PRIMARY KEY (singleton),
    CONSTRAINT oauth_keys_singleton_check CHECK (singleton)
);

CREATE TABLE public.oauth_registration_attempts (
    client text NOT NULL,
    attempted_at timestamp with time zone DEFAULT now() NOT NULL
);
CREATE INDEX oauth_registration_attempts_idx ON public.oauth_registration_attempts USING btree (client, attempted_at);

CREATE TABLE public.operator_endpoint_alerts (
    agent_id uuid NOT NULL,
    told text NOT NULL,
    told_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT operator_endpoint_alerts_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES public.agents(id) ON DELETE CASCADE,
    CONSTRAINT operator_endpoint_alerts_pkey PRIMARY KEY (agent_id),
    CONSTRAINT operator_endpoint_alerts_told_check CHECK ((told = ANY (ARRAY['warned'::text, 'switched_off'::text])))
);

CREATE TABLE public.operator_notice_attempts (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    notice_id uuid NOT NULL,
    webhook_id uuid NOT NULL,
    attempt smallint NOT NULL,
    attempted_at timestamp with time zone NOT NULL,
    duration_ms integer NOT NULL,
    status integer,
    error text,
    response_body text,
    CONSTRAINT operator_notice_attempts_notice_id_fkey FOREIGN KEY (notice_id) REFERENCES public.operator_notices(id) ON DELETE CASCADE,
    CONSTRAINT operator_notice_attempts_pkey PRIMARY KEY (id),
    CONSTRAINT operator_notice_attempts_webhook_id_fkey FOREIGN KEY (webhook_id) REFERENCES public.operator_webhooks(id) ON DELETE CASCADE
);
CREATE INDEX operator_notice_attempts_notice_idx ON public.operator_notice_attempts USING btree (notice_id, id);
CREATE INDEX operator_notice_attempts_webhook_idx ON public.operator_notice_attempts USING btree (webhook_id, id);

CREATE TABLE public.operator_notices (
    id uuid DEFAULT public.uuid_v7() NOT NULL,
    webhook_id uuid NOT NULL,
    event text NOT NULL,
    notice jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    attempts smallint DEFAULT 0 NOT NULL,
    delivered_at timestamp with time zone,
    gave_up_at timestamp with time zone,
    CONSTRAINT operator_notices_pkey PRIMARY KEY (id),
    CONSTRAINT operator_notices_webhook_id_fkey FOREIGN KEY (webhook_id) REFERENCES public.operator_webhooks(id) ON DELETE CASCADE
);
CREATE INDEX operator_notices_created_idx ON public.operator_notices USING btree (created_at);
CREATE INDEX operator_notices_webhook_idx ON public.operator_notices USING btree (webhook_id, id);

CREATE TABLE public.operator_webhooks (
    id uuid DEFAULT public.uuid_v7() NOT NULL,
    url text NOT NULL,
    format text NOT NULL,
    secret text NOT NULL,
    source text NOT NULL,
    added_by text NOT NULL,
    added_at timestamp with time zone DEFAULT now() NOT NULL,
    last_success_at timestamp with time zone,
    last_failure_at timestamp with time zone,
    last_failure text,
    failing_since timestamp with time zone,
    CONSTRAINT operator_webhooks_format_check CHECK ((format = ANY (ARRAY['slack'::text, 'json'::text]))),
    CONSTRAINT operator_webhooks_pkey PRIMARY KEY (id),
    CONSTRAINT operator_webhooks_source_check CHECK ((source = ANY (ARRAY['dashboard'::text, 'environment'::text])))
);
CREATE UNIQUE INDEX operator_webhooks_environment_idx ON public.operator_webhooks USING btree (source) WHERE (source = 'environment'::text);

CREATE TABLE public.participants (
    thread_id uuid NOT NULL,
    agent_id uuid NOT NULL,
    joined_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT participants_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES public.agents(id),
    CONSTRAINT participants_pkey PRIMARY KEY (thread_id, agent_id),
    CONSTRAINT participants_thread_id_fkey FOREIGN KEY (thread_id) REFERENCES public.threads(id) ON DELETE CASCADE
);
CREATE INDEX participants_agent_idx ON public.participants USING btree (agent_id, thread_id);
CREATE TRIGGER participants_listing_changed AFTER INSERT OR DELETE ON public.participants FOR EACH ROW EXECUTE FUNCTION public.notify_participant_listing();

CREATE TABLE public.people (
    id uuid DEFAULT public.uuid_v7() NOT NULL,
    email text NOT NULL,
    username text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    username_owner text GENERATED ALWAYS AS ('person'::text) STORED NOT NULL,
    CONSTRAINT people_email_key UNIQUE (email),
    CONSTRAINT people_pkey PRIMARY KEY (id),
    CONSTRAINT people_username_key UNIQUE (username),
    CONSTRAINT people_username_username_owner_fkey FOREIGN KEY (username, username_owner) REFERENCES public.usernames(username, owner)
);

CREATE TABLE public.presence_connections (
    agent_id uuid NOT NULL,
    instance_id uuid NOT NULL,
    since timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT presence_connections_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES public.agents(id) ON DELETE CASCADE,
    CONSTRAINT presence_connections_instance_id_fkey FOREIGN KEY (instance_id) REFERENCES public.presence_instances(id) ON DELETE CASCADE,
    CONSTRAINT presence_connections_pkey PRIMARY KEY (agent_id, instance_id)
);
CREATE INDEX presence_connections_instance_idx ON public.presence_connections USING btree (instance_id);

CREATE TABLE public.presence_instances (
    id uuid NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    heartbeat_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT presence_instances_pkey PRIMARY KEY (id)
);
CREATE INDEX presence_instances_heartbeat_idx ON public.presence_instances USING btree (heartbeat_at);

CREATE TABLE public.schema_migrations (
    name text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT schema_migrations_pkey PRIMARY KEY (name)
);

CREATE UNLOGGED TABLE public.send_counts (
    agent_id uuid NOT NULL,
    kind text NOT NULL,
    window_start timestamp with time zone NOT NULL,
    count integer NOT NULL,
    CONSTRAINT send_counts_kind_check CHECK ((kind = ANY (ARRAY['message'::text, 'thread'::text]))),
    CONSTRAINT send_counts_pkey PRIMARY KEY (agent_id, kind)
);

CREATE TABLE public.sessions (
    token_hash bytea NOT NULL,
    person_id uuid NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT sessions_person_id_fkey FOREIGN KEY (person_id) REFERENCES public.people(id) ON DELETE CASCADE,
    CONSTRAINT sessions_pkey PRIMARY KEY (token_hash)
);
CREATE INDEX sessions_person_idx ON public.sessions USING btree (person_id);

CREATE TABLE public.sign_in_attempts (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    kind text NOT NULL,
    email text NOT NULL,
    client text NOT NULL,
    attempted_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT sign_in_attempts_kind_check CHECK ((kind = ANY (ARRAY['code_request'::text, 'wrong_code'::text]))),
    CONSTRAINT sign_in_attempts_pkey PRIMARY KEY (id)
);
CREATE INDEX sign_in_attempts_client_idx ON public.sign_in_attempts USING btree (kind, client, attempted_at);
CREATE INDEX sign_in_attempts_email_idx ON public.sign_in_attempts USING btree (kind, email, attempted_at);

CREATE TABLE public.sign_in_codes (
    person_id uuid NOT NULL,
    code_hash bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT sign_in_codes_person_id_fkey FOREIGN KEY (person_id) REFERENCES public.people(id) ON DELETE CASCADE,
    CONSTRAINT sign_in_codes_pkey PRIMARY KEY (person_id)
);

CREATE TABLE public.thread_pause_notices (
    thread_id uuid NOT NULL,
    paused_at timestamp with time zone NOT NULL,
    CONSTRAINT thread_pause_notices_pkey PRIMARY KEY (thread_id, paused_at),
    CONSTRAINT thread_pause_notices_thread_id_fkey FOREIGN KEY (thread_id) REFERENCES public.threads(id) ON DELETE CASCADE
);

CREATE TABLE public.threads (
    id uuid DEFAULT public.uuid_v7() NOT NULL,
    title text NOT NULL,
    goal text,
    state public.thread_state DEFAULT 'open'::public.thread_state NOT NULL,
    opened_by uuid NOT NULL,
    close_requested_at timestamp with time zone,
    closed_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_activity_at timestamp with time zone DEFAULT now() NOT NULL,
    holds_messages boolean DEFAULT false NOT NULL,
    paused_at timestamp with time zone,
    loop_counted_from timestamp with time zone,
    CONSTRAINT threads_opened_by_fkey FOREIGN KEY (opened_by) REFERENCES public.agents(id),
    CONSTRAINT threads_pkey PRIMARY KEY (id)
);
CREATE INDEX threads_activity_idx ON public.threads USING btree (last_activity_at DESC, id DESC);
CREATE INDEX threads_close_pending_idx ON public.threads USING btree (id) WHERE (state = 'close-pending'::public.thread_state);
CREATE INDEX threads_goal_trgm_idx ON public.threads USING gin (goal public.gin_trgm_ops);
CREATE INDEX threads_paused_idx ON public.threads USING btree (paused_at) WHERE (paused_at IS NOT NULL);
CREATE INDEX threads_title_trgm_idx ON public.threads USING gin (title public.gin_trgm_ops);
CREATE TRIGGER threads_governance_changed AFTER UPDATE OF holds_messages, paused_at ON public.threads FOR EACH ROW WHEN (((old.holds_messages IS DISTINCT FROM new.holds_messages) OR (old.paused_at IS DISTINCT FROM new.paused_at))) EXECUTE FUNCTION public.notify_thread_listing();
CREATE TRIGGER threads_listing_changed AFTER INSERT OR UPDATE OF state, title, goal ON public.threads FOR EACH ROW EXECUTE FUNCTION public.notify_thread_listing();

CREATE TABLE public.usernames (
    username text NOT NULL,
    owner text NOT NULL,
    CONSTRAINT usernames_owner_check CHECK ((owner = ANY (ARRAY['agent'::text, 'person'::text]))),
    CONSTRAINT usernames_pkey PRIMARY KEY (username),
    CONSTRAINT usernames_username_owner_key UNIQUE (username, owner)
);

CREATE TABLE public.worker_heartbeats (
    worker_id text NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    beat_at timestamp with time zone DEFAULT now() NOT NULL,
    queued bigint[] DEFAULT '{}'::bigint[] NOT NULL,
    CONSTRAINT worker_heartbeats_pkey PRIMARY KEY (worker_id)
);
