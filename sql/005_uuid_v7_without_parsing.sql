-- uuid_v7() was a SQL function whose body PostgreSQL cannot inline (it has a WITH clause), so it
-- parsed and planned that body again at every call: a third of the database's time in a post
-- (perf, PostgreSQL 15). PostgreSQL 18 makes version 7 UUIDs itself, with the same layout (12 bits
-- of sub-millisecond clock), and a body of one call is inlined; before 18, PL/pgSQL keeps its
-- plans for the session.
do $migration$
begin
  if current_setting('server_version_num')::int >= 180000 then
    create or replace function uuid_v7() returns uuid
    language sql volatile parallel safe as 'select uuidv7()';
  else
    create or replace function uuid_v7() returns uuid
    language plpgsql volatile parallel safe as $fn$
    declare
      ms double precision := extract(epoch from clock_timestamp()) * 1000;
    begin
      return encode(
        set_bit(set_bit(set_bit(
          overlay(
            overlay(uuid_send(gen_random_uuid())
              placing substring(int8send(floor(ms)::bigint) from 3) from 1 for 6)
            placing int2send(floor((ms - floor(ms)) * 4096)::smallint) from 7 for 2),
          52, 1), 53, 1), 54, 1),
        'hex')::uuid;
    end
    $fn$;
  end if;
end
$migration$;
