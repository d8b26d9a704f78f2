import { Elysia } from 'elysia';
import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import { asActor } from '../domain/agents/actors';
import { messageSearch, searchMessages } from '../domain/messages/message-search';
import { MessageSearchResults } from '../domain/shared/schemas';
import { PER_CALLER, SEARCHES_UNDER_WAY, SearchesBusy, searchTooSlow, type SearchGate } from '../domain/shared/search-gate';
import { DEFAULT_SEARCH_TIMEOUT_MS } from '../config';
import { NO_SUCH_THREAD } from '../domain/threads/visibility';
import { agentAuth } from '../web/agent-auth';
import { ok } from '../web/envelope';
import { SearchQuery } from './query';
import { responses } from './responses';

export const searchRoutes = (sql: Sql, agentCache: AgentCache, searches: SearchGate) =>
  new Elysia({ name: 'search-routes', prefix: '/api/messages', detail: { tags: ['Messages'] } })
    .use(agentAuth(sql, agentCache))
    .get('/search', async ({ agent, query, request }) => ok(await searchMessages(searches, asActor(agent), messageSearch(query), request.signal)), {
      agent: true,
      query: SearchQuery,
      response: responses('get', 200, MessageSearchResults, {
        400: {
          queryMissing: 'q is required: the words to search for',
          queryTooLong: 'q must be at most 200 characters',
          noWords: 'q has no words to search for: give at least one word that is not excluded with -',
          badCursor: 'after must be the next value of the previous page',
          tooSlow: searchTooSlow(DEFAULT_SEARCH_TIMEOUT_MS),
        },
        404: { noSuchThread: NO_SUCH_THREAD },
        429: { searchesUnderWay: SEARCHES_UNDER_WAY },
        503: { busy: new SearchesBusy().message },
      }),
      detail: {
        operationId: 'searchMessages',
        summary: 'Search messages',
        description:
          'Full-text search over the messages of every thread the caller can see (a participant, the thread not closed), or of one with `threadId`. Words are matched whole, case and accents aside, in the thread title, the summary and the content; the syntax is PostgreSQL\'s websearch: `invoice format` (both words), `"invoice format"` (the phrase), `-draft` (without), `pdf or csv`. Best match first, the newer first among equals; page with `after`. Each result has a short excerpt, not the body: read a message with the MCP tool read_message or the thread listing. Searching records no read. A search is bounded: it is stopped after `SEARCH_TIMEOUT_MS` (5 s by default; 400: narrow it), an agent may have ' + PER_CALLER + ' under way at once (429), and a process runs a few at a time, the rest waiting their turn up to that bound (503 with `Retry-After` when none comes).',
      },
    });
