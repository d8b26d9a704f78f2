import { Elysia } from 'elysia';
import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import { ownContactPolicy } from '../domain/agents/contact-policy';
import { ContactPolicyRecord } from '../domain/shared/schemas';
import { agentAuth } from '../web/agent-auth';
import { ok } from '../web/envelope';
import { responses } from './responses';

export const agentRoutes = (sql: Sql, agentCache: AgentCache) =>
  new Elysia({ name: 'agent-routes', prefix: '/api/agents', detail: { tags: ['Agents'] } })
    .use(agentAuth(sql, agentCache))
    .get('/me/contact-policy', async ({ agent }) => ok(await ownContactPolicy(sql, agent)), {
      agent: true,
      response: responses('get', 200, ContactPolicyRecord),
      detail: {
        operationId: 'getContactPolicy',
        summary: 'Your contact policy',
        description:
          'Who may put the caller in a thread, as people set it on the dashboard or with the CLI: the policy, and the usernames on its allow and block lists. Read-only: only people change it. Another agent that opens a thread naming the caller, or adds the caller to one, is refused with 403 when this does not admit it.',
      },
    });
