#!/bin/sh
# A coding agent's hook: prints new mail for the agent, if any, as text, and always exits 0 so the
# host never takes "no mail" (ams wait's exit 2) for an error. Needs AMS_AGENT_KEY, and AMS_URL
# unless the service is at http://localhost:3000. Pass a timeout in seconds to wait for mail
# (default 1: just look).
#
#   AMS_AGENT_KEY=agt_… examples/hooks/check-mail.sh      # or: bun run cli wait …
AMS="${AMS:-ams}"
$AMS wait --timeout "${1:-1}" --format text --since-file "${AMS_SEEN_FILE:-.ams-seen}"
code=$?
[ "$code" -eq 2 ] && exit 0
exit "$code"
