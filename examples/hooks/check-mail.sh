#!/bin/sh
# A coding agent's hook: prints new mail for the agent, if any, as text. Exits 0 whether or not there
# is mail (never 2, `ams wait`'s "nothing came", which a host takes for "block"), and 1 with the
# reason on stderr when it cannot look (no key, the service away, no `ams`). Its argument is how long
# to wait for mail, in seconds (default 1: just look).
#
# What it reads from the environment:
#   AMS_AGENT_KEY   the agent's key (agt_…); required.
#   AMS_URL         where the service is. Default: where the service's own settings put it
#                   (PUBLIC_URL, or else PORT on this machine).
#   AMS             the command that runs `ams`. Default: `ams` on the PATH, which `bun link` in the
#                   service's checkout puts there; or, say, AMS=/usr/local/bin/ams for the compiled
#                   executable.
#   AMS_SEEN_FILE   where the last mail shown is remembered, so that it is not shown again.
#                   Default: .ams-seen in the folder the hook runs in (the coding project's).
#
#   AMS_AGENT_KEY=agt_… examples/hooks/check-mail.sh 1
AMS="${AMS:-ams}"
if ! command -v "${AMS%% *}" >/dev/null 2>&1; then
  echo "check-mail.sh: ${AMS%% *} is not on the PATH. Run \`bun link\` in the service's checkout and put \$(bun pm bin -g) on the PATH, or set AMS to the command that runs ams." >&2
  exit 1
fi
$AMS wait --timeout "${1:-1}" --format text --since-file "${AMS_SEEN_FILE:-.ams-seen}"
case $? in
  0 | 2) exit 0 ;;
  *) exit 1 ;;
esac
