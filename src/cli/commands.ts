import { webhookUrlPolicy, type Config } from '../config';
import type { Sql } from '../db/connect';
import { createAgent, removeWebhook, setArchived, setWebhook } from '../domain/agents/agents';
import { resendDelivery } from '../domain/deliveries/delivery-steps';
import { invalid } from '../domain/shared/errors';
import { invitePerson } from '../domain/people/people';
import { confirmClose, declineClose } from '../domain/threads/threads';

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
      createAgent(sql, { username, webhookUrl: flags.webhook }, webhookUrlPolicy(config)),
  },
  'agents archive': {
    usage: 'agents archive <username>',
    run: ({ sql }, [username]) => setArchived(sql, username!, true),
  },
  'agents unarchive': {
    usage: 'agents unarchive <username>',
    run: ({ sql }, [username]) => setArchived(sql, username!, false),
  },
  'webhooks set': {
    usage: 'webhooks set <username> <url>',
    run: ({ sql, config }, [username, url]) => setWebhook(sql, username!, url!, webhookUrlPolicy(config)),
  },
  'webhooks remove': {
    usage: 'webhooks remove <username>',
    run: ({ sql }, [username]) => removeWebhook(sql, username!),
  },
  'threads confirm-close': {
    usage: 'threads confirm-close <threadId>',
    run: ({ sql }, [threadId]) => confirmClose(sql, threadId!),
  },
  'threads decline-close': {
    usage: 'threads decline-close <threadId>',
    run: ({ sql }, [threadId]) => declineClose(sql, threadId!),
  },
  'deliveries resend': {
    usage: 'deliveries resend <deliveryId>',
    run: ({ sql }, [deliveryId]) => resendDelivery(sql, deliveryId!),
  },
  'people invite': {
    usage: 'people invite <email> <username>',
    run: ({ sql }, [email, username]) => invitePerson(sql, { email, username }),
  },
};

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
  const expected = (command.usage.match(/<[^>]+>/g) ?? []).length - (command.usage.match(/\[--[^\]]+\]/g) ?? []).length;
  if (args.length !== expected) throw invalid(`Usage: ${command.usage}`);
  const allowedFlags = [...command.usage.matchAll(/--(\w+)/g)].map((m) => m[1]);
  const unknown = Object.keys(flags).find((f) => !allowedFlags.includes(f));
  if (unknown) throw invalid(`Unknown option --${unknown}. Usage: ${command.usage}`);
  return { command, args, flags };
}

export async function runCommand(deps: CliDeps, argv: string[]): Promise<unknown> {
  const { command, args, flags } = parseCommand(argv);
  return command.run(deps, args, flags);
}
