import { invalid } from '../domain/shared/errors';

// The flags of a CLI client command (`wait`, `listen`, `channel`): each `--name value` named in
// `valued`, each `--name` in `switches`; anything else is refused with the command's usage.
export function parseFlags(argv: string[], { valued, switches = [] }: { valued: string[]; switches?: string[] }, usage: string) {
  const flags: Record<string, string> = {};
  const on = new Set<string>();
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    if (switches.includes(flag)) {
      on.add(flag.slice(2));
      continue;
    }
    const value = argv[i + 1];
    if (!valued.includes(flag)) throw invalid(`Unknown argument ${flag}. Usage: ${usage}`);
    if (value === undefined) throw invalid(`${flag} needs a value. Usage: ${usage}`);
    flags[flag.slice(2)] = value;
    i++;
  }
  return { flags, on };
}

// The agent key comes from the environment, never from the command line (where `ps` shows it).
export function agentKeyFrom(env: Record<string, string | undefined>): string {
  const key = env.AMS_AGENT_KEY;
  if (!key) throw invalid('Set AMS_AGENT_KEY to the agent key (agt_…).');
  return key;
}

// Where the service is: the flag, AMS_URL, or else where this checkout's server runs (serviceUrl in
// config.ts: PUBLIC_URL, or PORT on this machine).
export const baseUrlFrom = (flag: string | undefined, env: Record<string, string | undefined>, serviceUrl: string) =>
  (flag ?? (env.AMS_URL || serviceUrl)).replace(/\/+$/, '');
