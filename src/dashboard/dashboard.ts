import { Elysia } from 'elysia';
import type { Config } from '../config';
import type { AgentCache } from '../db/agent-cache';
import type { Reads, Sql } from '../db/connect';
import type { SearchGate } from '../domain/shared/search-gate';
import type { Logger } from '../log';
import type { Metrics } from '../metrics';
import { dashboardApi } from './api';
import { deliveryFeed } from './feed';
import { codeSender } from './mail';
import { dashboardPages } from './pages';
import { sessionStreams } from './session-streams';

// Everything under /dashboard: the pages people use and the private JSON API behind them.
export const dashboard = ({ sql, reads, config, log, metrics, searches, agentCache }: {
  sql: Sql;
  reads: Reads;
  config: Config;
  log: Logger;
  metrics: Metrics;
  searches: SearchGate;
  agentCache: AgentCache;
}) =>
  new Elysia({ name: 'dashboard' })
    .use(dashboardPages(sql))
    .use(
      dashboardApi({
        sql,
        reads,
        config,
        log,
        metrics,
        searches,
        agentCache,
        sendCode: codeSender(config, log),
        feed: deliveryFeed(sql, reads, config.STALLED_AFTER_MS, log),
        streams: sessionStreams(sql, config.SESSION_CHECK_MS, log),
      }),
    );
