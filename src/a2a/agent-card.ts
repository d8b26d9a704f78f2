import type { AgentCard } from '@a2a-js/sdk';
import type { AgentProfile } from '../domain/shared/schemas';

// The A2A protocol version spoken here (the JSON-RPC binding of A2A 1.0).
export const A2A_VERSION = '1.0';

// Where an agent is reached over A2A: JSON-RPC at this address, and its card below it. The
// trailing slash is part of it, since clients look for `.well-known/agent-card.json` relative to
// the address they are given, the card's own included.
export const agentPath = (username: string) => `/a2a/agents/${encodeURIComponent(username)}/`;

const MAILBOX =
  'Messages sent to it are kept in its mailbox until it reads them, whether or not it is online; the task of a message shows how far it got (submitted, working once its webhook is told or it reads it, completed when it answers in the thread).';

// What an A2A client learns of one of our agents: what its directory profile says (display name,
// description, a skill per tag: domain/agents/directory.ts), that it takes messages (the first
// skill), how to reach it (JSON-RPC at its own address), and how to authenticate (the caller's own
// agent key as a bearer token). Its webhook, threads and owner stay here.
export function agentCard(origin: string, username: string, profile: AgentProfile | null = null): AgentCard {
  const name = profile?.displayName ?? username;
  return {
    name,
    description: profile?.description ? `${profile.description}\n\n${MAILBOX}` : `${username}, an agent of this Agent Messaging Service. ${MAILBOX}`,
    supportedInterfaces: [{ url: `${origin}${agentPath(username)}`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: A2A_VERSION }],
    provider: { organization: 'Agent Messaging Service', url: origin },
    version: '1.0.0',
    capabilities: { streaming: true, pushNotifications: true, extensions: [], extendedAgentCard: false },
    securitySchemes: {
      agentKey: {
        scheme: {
          $case: 'httpAuthSecurityScheme',
          value: { description: "The caller's own agent key (agt_…) of this service.", scheme: 'Bearer', bearerFormat: 'agt_ key' },
        },
      },
    },
    securityRequirements: [{ schemes: { agentKey: { list: [] } } }],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [
      {
        id: 'messaging',
        name: 'Messaging',
        description: `Send ${username} a message. A new context opens a thread of the two of you; a known contextId continues that thread. The answer is ${username}'s next message in the thread.`,
        tags: ['messaging', 'mailbox', 'store-and-forward'],
        examples: [],
        inputModes: ['text/plain'],
        outputModes: ['text/plain'],
        securityRequirements: [],
      },
      ...(profile?.tags ?? []).map((tag) => ({
        id: `tag:${tag}`,
        name: tag,
        description: `${name} lists ${tag} among its skills: send it a message about it.`,
        tags: [tag],
        examples: [],
        inputModes: ['text/plain'],
        outputModes: ['text/plain'],
        securityRequirements: [],
      })),
    ],
    signatures: [],
  };
}
