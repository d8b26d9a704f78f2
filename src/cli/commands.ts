import { webhookUrlPolicy, type Config } from '../config';
import type { Sql } from '../db/connect';
import { createAgent, removeWebhook, setArchived, setWebhook } from '../domain/agents/agents';
import { setAgentHolds, setSendQuotas } from '../domain/agents/governance';
import { enableWebhook, pauseWebhook, resumeWebhook } from '../domain/agents/webhook-switch';
import { rotateSigningSecret } from '../domain/agents/signing-secrets';
import { resendDelivery } from '../domain/deliveries/delivery-steps';
import { invalid } from '../domain/shared/errors';
import { auditFilter, BY_CLI, exportDecisions } from '../domain/people/audit';
import { invitePerson } from '../domain/people/people';
import { resumeThread, setThreadHolds } from '../domain/threads/thread-holds';
import { contactPolicy, removeContact, setContact, setContactPolicy } from '../domain/agents/contact-policy';
import { confirmClose, declineClose } from '../domain/threads/threads';
import { createKey, keysOf, revokeKey } from '../domain/agents/agent-keys';
import { setProfile } from '../domain/agents/directory';

export type CliDeps = { sql: Sql; config: Config };

type Command = {
  usage: string;
  run: (deps: CliDeps, args: string[], flags: Record<string, string>) => Promise<unknown>;
};

// Admin commands, each a thin call into the domain. Keys are in the "group verb" form.
export const commands: Record<string, Command> = {
  'agents create': {
    usage: 'agents create <username> [--webhook <url>]',
    run: ({ sql, config }, [username], flags) =>
      createAgent(sql, BY_CLI, { username, webhookUrl: flags.webhook }, webhookUrlPolicy(config)),
  },
  'agents archive': {
    usage: 'agents archive <username>',
    run: ({ sql }, [username]) => setArchived(sql, BY_CLI, username!, true),
  },
  'agents unarchive': {
    usage: 'agents unarchive <username>',
    run: ({ sql }, [username]) => setArchived(sql, BY_CLI, username!, false),
  },
  'agents quotas': {
    usage: 'agents quotas <username> [--messages-per-minute <n|default>] [--threads-per-hour <n|default>]',
    run: ({ sql }, [username], flags) =>
      setSendQuotas(sql, BY_CLI, username!, {
        messagesPerMinute: quotaFlag(flags['messages-per-minute']),
        threadsPerHour: quotaFlag(flags['threads-per-hour']),
      }),
  },
  'agents hold': {
    usage: 'agents hold <username>',
    run: ({ sql }, [username]) => setAgentHolds(sql, BY_CLI, username!, true),
  },
  'agents release': {
    usage: 'agents release <username>',
    run: ({ sql }, [username]) => setAgentHolds(sql, BY_CLI, username!, false),
  },
  'agents policy': {
    usage: 'agents policy <username> <open|contacts|closed>',
    run: ({ sql }, [username, policy]) => setContactPolicy(sql, BY_CLI, username!, policy),
  },
  'keys list': {
    usage: 'keys list <username>',
    run: async ({ sql }, [username]) => ({ username, keys: await keysOf(sql, username!) }),
  },
  'keys create': {
    usage: 'keys create <username> --name <name> [--expires-at <time>]',
    run: ({ sql }, [username], flags) => createKey(sql, BY_CLI, username!, { name: flags.name, expiresAt: flags['expires-at'] }),
  },
  'keys revoke': {
    usage: 'keys revoke <username> <keyId>',
    run: ({ sql }, [username, keyId]) => revokeKey(sql, BY_CLI, username!, keyId!),
  },
  'agents profile': {
    usage: 'agents profile <username> [--display-name <text>] [--description <text>] [--tags <a,b,…>]',
    // The whole profile, as the API sets it: an option left out clears its field.
    run: ({ sql }, [username], flags) =>
      setProfile(sql, BY_CLI, username!, {
        displayName: flags['display-name'],
        description: flags.description,
        tags: flags.tags === undefined ? [] : flags.tags.split(',').map((t) => t.trim()).filter((t) => t !== ''),
      }),
  },
  'contacts list': {
    usage: 'contacts list <username>',
    run: ({ sql }, [username]) => contactPolicy(sql, username!),
  },
  'contacts allow': {
    usage: 'contacts allow <username> <contact>',
    run: ({ sql }, [username, contact]) => setContact(sql, BY_CLI, username!, contact!, 'allow'),
  },
  'contacts block': {
    usage: 'contacts block <username> <contact>',
    run: ({ sql }, [username, contact]) => setContact(sql, BY_CLI, username!, contact!, 'block'),
  },
  'contacts remove': {
    usage: 'contacts remove <username> <contact>',
    run: ({ sql }, [username, contact]) => removeContact(sql, BY_CLI, username!, contact!),
  },
  'webhooks set': {
    usage: 'webhooks set <username> <url>',
    run: ({ sql, config }, [username, url]) => setWebhook(sql, BY_CLI, username!, url!, webhookUrlPolicy(config)),
  },
  'webhooks rotate-secret': {
    usage: 'webhooks rotate-secret <username> [--grace <duration>]',
    run: ({ sql, config }, [username], flags) => rotateSigningSecret(sql, BY_CLI, username!, flags.grace, config.WEBHOOK_SECRET_GRACE_MS),
  },
  'webhooks remove': {
    usage: 'webhooks remove <username>',
    run: ({ sql }, [username]) => removeWebhook(sql, BY_CLI, username!),
  },
  'webhooks pause': {
    usage: 'webhooks pause <username> [--reason <text>]',
    run: ({ sql }, [username], flags) => pauseWebhook(sql, BY_CLI, username!, flags.reason),
  },
  'webhooks resume': {
    usage: 'webhooks resume <username> [--resend-failed <yes|no>]',
    run: ({ sql }, [username], flags) => resumeWebhook(sql, BY_CLI, username!, { resendFailed: yesNo(flags, 'resend-failed') }),
  },
  'webhooks enable': {
    usage: 'webhooks enable <username> [--resend-failed <yes|no>] [--without-passing-test <yes|no>]',
    run: ({ sql }, [username], flags) =>
      enableWebhook(sql, BY_CLI, username!, { resendFailed: yesNo(flags, 'resend-failed'), withoutPassingTest: yesNo(flags, 'without-passing-test') }),
  },
  'threads confirm-close': {
    usage: 'threads confirm-close <threadId>',
    run: ({ sql }, [threadId]) => confirmClose(sql, BY_CLI, threadId!),
  },
  'threads decline-close': {
    usage: 'threads decline-close <threadId>',
    run: ({ sql }, [threadId]) => declineClose(sql, BY_CLI, threadId!),
  },
  'threads hold': {
    usage: 'threads hold <threadId>',
    run: ({ sql }, [threadId]) => setThreadHolds(sql, BY_CLI, threadId!, true),
  },
  'threads release': {
    usage: 'threads release <threadId>',
    run: ({ sql }, [threadId]) => setThreadHolds(sql, BY_CLI, threadId!, false),
  },
  'threads resume': {
    usage: 'threads resume <threadId>',
    run: ({ sql }, [threadId]) => resumeThread(sql, BY_CLI, threadId!),
  },
  'deliveries resend': {
    usage: 'deliveries resend <deliveryId>',
    run: ({ sql }, [deliveryId]) => resendDelivery(sql, BY_CLI, deliveryId!),
  },
  'audit export': {
    usage: 'audit export --since <time> [--until <time>] [--action <prefix>]',
    run: async ({ sql }, _args, flags) => {
      if (flags.since === undefined) throw invalid('audit export needs --since: an ISO time or a duration back from now such as 24h or 7d.');
      return new JsonLines(exportDecisions(sql, auditFilter(flags)));
    },
  },
  'people invite': {
    usage: 'people invite <email> <username>',
    run: ({ sql }, [email, username]) => invitePerson(sql, BY_CLI, { email, username }),
  },
};

// A quota flag's value as the domain takes it: `default` is null (the deployment's default), a flag
// left out leaves its quota as it is, and what is not a whole number goes on as typed, for the
// domain's sentence.
const quotaFlag = (value: string | undefined) => (value === 'default' ? null : value !== undefined && /^-?\d+$/.test(value) ? Number(value) : value);

// A yes-or-no flag: left out, no.
function yesNo(flags: Record<string, string>, name: string): boolean {
  const value = flags[name];
  if (value === undefined || value === 'no') return false;
  if (value === 'yes') return true;
  throw invalid(`--${name} takes yes or no, not "${value}".`);
}

// An answer printed as it is read, one JSON object a line, instead of one object at the end.
export class JsonLines {
  constructor(readonly items: AsyncIterable<unknown>) {}
}

export const usage = () => Object.values(commands).map((c) => `  ${c.usage}`).join('\n');

// Splits argv into the command, its positional arguments and its --flags, checking the count
// of positionals against the command's usage line.
export function parseCommand(argv: string[]): { command: Command; args: string[]; flags: Record<string, string> } {
  const key = argv.slice(0, 2).join(' ');
  const command = commands[key];
  if (!command) throw invalid(`Unknown command "${argv.join(' ')}". Commands:\n${usage()}`);
  const args: string[] = [];
  const flags: Record<string, string> = {};
  const rest = argv.slice(2);
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!;
    if (arg.startsWith('--')) {
      const value = rest[++i];
      if (value === undefined) throw invalid(`${arg} needs a value. Usage: ${command.usage}`);
      flags[arg.slice(2)] = value;
    } else args.push(arg);
  }
  const expected = (command.usage.replace(/--[\w-]+ <[^>]+>/g, '').match(/<[^>]+>/g) ?? []).length;
  if (args.length !== expected) throw invalid(`Usage: ${command.usage}`);
  const allowedFlags = [...command.usage.matchAll(/--([\w-]+)/g)].map((m) => m[1]);
  const unknown = Object.keys(flags).find((f) => !allowedFlags.includes(f));
  if (unknown) throw invalid(`Unknown option --${unknown}. Usage: ${command.usage}`);
  return { command, args, flags };
}

export async function runCommand(deps: CliDeps, argv: string[]): Promise<unknown> {
  const { command, args, flags } = parseCommand(argv);
  return command.run(deps, args, flags);
}
