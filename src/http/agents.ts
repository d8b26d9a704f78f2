import { Elysia, t } from 'elysia';
import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import { ownContactPolicy } from '../domain/agents/contact-policy';
import { createOwnKey, LAST_KEY, MOST_KEYS, NO_SUCH_KEY, ownKeys, revokeOwnKey, TOO_MANY_KEYS } from '../domain/agents/agent-keys';
import { AgentKeyRecord, ContactPolicyRecord, CreatedAgentKey, NewAgentKey } from '../domain/shared/schemas';
import type { Logger } from '../log';
import { agentAuth } from '../web/agent-auth';
import { ok } from '../web/envelope';
import { requestLog } from '../web/request-id';
import { jsonBody, responses } from './responses';

const KeyParams = t.Object({ keyId: t.String({ description: 'The id of one of the caller\'s keys, from GET /api/agents/me/keys' }) });

export const agentRoutes = (sql: Sql, agentCache: AgentCache, log: Logger) =>
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
    })
    .get('/me/keys', async ({ agent }) => ok(await ownKeys(sql, agent)), {
      agent: true,
      response: responses('get', 200, t.Array(AgentKeyRecord)),
      detail: {
        operationId: 'listKeys',
        summary: 'Your keys',
        description: `The caller's keys (at most ${MOST_KEYS}), oldest first: name, prefix, when each was created, last used (to within a minute or two) and expires. \`current\` marks the key this request was made with. The keys themselves are never shown again.`,
      },
    })
    .post(
      '/me/keys',
      async ({ agent, body, set, request }) => {
        const key = await createOwnKey(sql, agent, body);
        requestLog(log, request).info('agent_key_created', { agent: agent.username, key: key.prefix });
        set.status = 201;
        return ok(key);
      },
      {
        agent: true,
        response: responses('post', 201, CreatedAgentKey, {
          400: {
            nameMissing: 'name is required',
            nameTooLong: 'name must be at most 64 characters',
            badExpiry: 'expiresAt must be a date and time with its offset, such as 2027-02-01T00:00:00Z',
            pastExpiry: 'expiresAt must be in the future',
          },
          409: { tooManyKeys: TOO_MANY_KEYS },
        }),
        detail: {
          ...jsonBody(NewAgentKey),
          operationId: 'createKey',
          summary: 'Create a key',
          description: `A new key for the caller, answering at once on every instance beside the caller's other keys. The key itself (\`apiKey\`) is in this answer only: store it before doing anything else. To rotate, create a key, switch to it, then revoke the old one (DELETE /api/agents/me/keys/{keyId}). An agent has at most ${MOST_KEYS} keys, expired ones included (409 beyond). With \`expiresAt\`, the key stops answering then (401).`,
        },
      },
    )
    .delete(
      '/me/keys/:keyId',
      async ({ agent, params, request }) => {
        const key = await revokeOwnKey(sql, agent, params.keyId);
        agentCache.forget({ id: agent.id });
        requestLog(log, request).info('agent_key_revoked', { agent: agent.username, key: key.prefix, current: key.current });
        return ok(key);
      },
      {
        agent: true,
        params: KeyParams,
        response: responses('delete', 200, AgentKeyRecord, {
          404: { noSuchKey: NO_SUCH_KEY },
          409: { lastKey: LAST_KEY },
        }),
        detail: {
          operationId: 'revokeKey',
          summary: 'Revoke a key',
          description:
            "Revokes one of the caller's keys at once, on every instance: requests with it are refused (401) from the moment this answers, and event streams, MCP streams and waits held open with it end. Revoking the key this request is made with is allowed (this answer is its last). The caller's last key that has not expired cannot be revoked (409): create another first. Answers the key as it was.",
        },
      },
    );
