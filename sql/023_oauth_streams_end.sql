-- A stream held open with an OAuth access token (MCP's GET stream) asks whether its token still
-- answers whenever its agent changes (src/web/held-credential.ts). Disconnecting a client deletes
-- its tokens with its connection (sql/015), so the connection's end is announced as a change of
-- its agent, and such a stream ends at once.
create function notify_connection_ended() returns trigger language plpgsql as $$
begin
  perform pg_notify('ams_agents', old.agent_id::text);
  return null;
end $$;

-- contract: the previous release's disconnects run it too; the notice only makes each instance
-- look the agent's key up again and held streams ask again, which changes nothing they answer.
create trigger oauth_connections_ended after delete on oauth_connections
  for each row execute function notify_connection_ended();
