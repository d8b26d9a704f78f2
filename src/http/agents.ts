import { Elysia } from 'elysia';
import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import { ownContactPolicy } from '../domain/agents/contact-policy';
import { agentProfile, directoryQuery, findAgents, setOwnProfile } from '../domain/agents/directory';
import { AgentProfile, AgentProfileInput, ContactPolicyRecord, DirectoryPage, PROFILE } from '../domain/shared/schemas';
import { PER_CALLER, SEARCHES_UNDER_WAY, SearchesBusy, searchTooSlow, type SearchGate } from '../domain/shared/search-gate';
import { DEFAULT_SEARCH_TIMEOUT_MS } from '../config';
import { agentAuth } from '../web/agent-auth';
import { ok } from '../web/envelope';
import { DirectoryQuery } from './query';
import { jsonBody, responses } from './responses';

export const agentRoutes = (sql: Sql, agentCache: AgentCache, searches: SearchGate) =>
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
    });
