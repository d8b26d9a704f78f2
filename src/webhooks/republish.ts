import type { Task } from 'graphile-worker';
import type { Sql } from '../db/connect';
import { republishStranded, type RepublishOptions } from '../domain/deliveries/delivery-steps';
import type { Logger } from '../log';

export const REPUBLISH_TASK = 'republish';

// The re-publish cron's task; the sweep itself, and what counts as stranded, is the domain's.
export const republishTask =
  (sql: Sql, log: Logger, options: RepublishOptions): Task =>
  async () => {
    const result = await republishStranded(sql, options);
    if (result.republished || result.failed) log.warn('doorbells_republished', result);
  };
