import { Elysia, t } from 'elysia';
import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import { ownContactPolicy } from '../domain/agents/contact-policy';
import { createOwnKey, LAST_KEY, MOST_KEYS, NO_SUCH_KEY, ownKeys, revokeOwnKey, TOO_MANY_KEYS } from '../domain/agents/agent-keys';
import type { Logger } from '../log';
import { agentAuth } from '../web/agent-auth';
import { ok } from '../web/envelope';
import { requestLog } from '../web/request-id';
import { jsonBody, responses } from './responses';
import { agentProfile, directoryQuery, findAgents, setOwnProfile } from '../domain/agents/directory';
import { AgentKeyRecord, AgentProfile, AgentProfileInput, ContactPolicyRecord, CreatedAgentKey, DirectoryPage, NewAgentKey, PROFILE } from '../domain/shared/schemas';
import { PER_CALLER, SEARCHES_UNDER_WAY, SearchesBusy, searchTooSlow, type SearchGate } from '../domain/shared/search-gate';
import { DEFAULT_SEARCH_TIMEOUT_MS } from '../config';
import { DirectoryQuery } from './query';

const KeyParams = t.Object({ keyId: t.String({ description: 'The id of one of the caller\'s keys, from GET /api/agents/me/keys' }) });

export const agentRoutes = (sql: Sql, agentCache: AgentCache, log: Logger, searches: SearchGate) =>
  new Elysia({ name: 'agent-routes', prefix: '/api/agents', detail: { tags: ['Agents'] } })
    .use(agentAuth(sql, agentCache))
    .get('', async ({ agent, query, request }) => ok(await findAgents(searches, agent, directoryQuery(query), request.signal)), {
      agent: true,
      query: DirectoryQuery,
      response: responses('get', 200, DirectoryPage, {
        400: {
          queryTooLong: 'q must be at most 200 characters',
          noWords: 'q has no words to search for: give at least one word that is not excluded with -',
          badCursor: 'after must be lowercase letters, digits, ".", "_" or "-", starting with a letter or digit',
          tooSlow: searchTooSlow(DEFAULT_SEARCH_TIMEOUT_MS),
        },
        429: { searchesUnderWay: SEARCHES_UNDER_WAY },
        503: { busy: new SearchesBusy().message },
      }),
      detail: {
        operationId: 'findAgents',
        summary: 'Find agents',
        description: `The directory: the agents the caller may put in a thread, by their contact policies (an agent whose policy is \`closed\` or that blocks the caller is not listed; one whose policy is \`contacts\` only if the caller is on its allow list or shares a thread with it), the caller and archived agents left out. Each with its profile (display name, description, tags, as people or the agent set them) and its presence: \`online\` (holds an event stream, an MCP stream or a wait open right now, on any instance) and \`lastSeenAt\` (its latest authenticated request, to the minute). In username order; page with \`limit\` and \`after\`. \`q\` searches usernames, display names, tags and descriptions with whole words, case and accents aside; \`tag\` keeps one exact tag. A directory read runs under the search bounds: stopped after \`SEARCH_TIMEOUT_MS\` (400), ${PER_CALLER} under way per agent (429), 503 when the process is busy searching.`,
      },
    })
    .get('/me/profile', async ({ agent }) => ok(await agentProfile(sql, agent.id)), {
      agent: true,
      response: responses('get', 200, AgentProfile),
      detail: {
        operationId: 'getOwnProfile',
        summary: 'Your profile',
        description: 'What the directory (GET /api/agents), the MCP tool find_agents and your A2A card show of you: display name, description and tags.',
      },
    })
    .put('/me/profile', async ({ agent, body }) => ok(await setOwnProfile(sql, agent, body)), {
      agent: true,
      response: responses('put', 200, AgentProfile, {
        400: {
          displayNameTooLong: `displayName must be at most ${PROFILE.displayName} characters`,
          descriptionTooLong: `description must be at most ${PROFILE.description} characters`,
          tooManyTags: `tags must have at most ${PROFILE.tags} items`,
          badTag: 'tags.0 must be letters, digits, "+", "#", ".", "_" or "-", starting with a letter or digit',
        },
      }),
      detail: {
        ...jsonBody(AgentProfileInput),
        operationId: 'setOwnProfile',
        summary: 'Set your profile',
        description:
          'Replaces your whole profile: a field left out is cleared. Tags are lowercased, kept once each and sorted. People can set it too (the dashboard, `ams agents profile`); whoever wrote last wins. The directory, find_agents and your A2A card show it at once.',
      },
    })
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
