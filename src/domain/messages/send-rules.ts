import { numericDefault, type Config } from '../../config';
import type { Sql } from '../../db/connect';

// What the deployment's settings make of an agent's sending (SEND_*, LOOP_BREAKER_*,
// HOLD_EXPIRES_AFTER_HOURS): the default quotas (0: none; a person's override per agent wins), the
// loop breaker (0 messages: off), and how long a held message waits for a person.
export type SendRules = {
  // Who hears of what the rules did (the process's metrics), where anybody does.
  watcher?: SendWatcher;
  messagesPerMinute: number;
  threadsPerHour: number;
  holdHours: number;
  loopMessages: number;
  loopWindowMinutes: number;
};

export const sendRules = (config: Pick<Config, 'SEND_MESSAGES_PER_MINUTE' | 'SEND_THREADS_PER_HOUR' | 'HOLD_EXPIRES_AFTER_HOURS' | 'LOOP_BREAKER_MESSAGES' | 'LOOP_BREAKER_WINDOW_MINUTES'>): SendRules => ({
  messagesPerMinute: config.SEND_MESSAGES_PER_MINUTE,
  threadsPerHour: config.SEND_THREADS_PER_HOUR,
  holdHours: config.HOLD_EXPIRES_AFTER_HOURS,
  loopMessages: config.LOOP_BREAKER_MESSAGES,
  loopWindowMinutes: config.LOOP_BREAKER_WINDOW_MINUTES,
});

// The configuration's defaults, for writes through a pool no server set up (scripts, the CLI).
const DEFAULT_SEND_RULES = sendRules({
  SEND_MESSAGES_PER_MINUTE: numericDefault('SEND_MESSAGES_PER_MINUTE'),
  SEND_THREADS_PER_HOUR: numericDefault('SEND_THREADS_PER_HOUR'),
  HOLD_EXPIRES_AFTER_HOURS: numericDefault('HOLD_EXPIRES_AFTER_HOURS'),
  LOOP_BREAKER_MESSAGES: numericDefault('LOOP_BREAKER_MESSAGES'),
  LOOP_BREAKER_WINDOW_MINUTES: numericDefault('LOOP_BREAKER_WINDOW_MINUTES'),
});

// One set of rules per connection pool, set by the process that serves through it (app.ts), as the
// ringer is (deliveries/doorbells-at-once.ts): the domain's writes read them without every door
// passing the configuration down.
const rules = new WeakMap<Sql, SendRules>();

// Who hears of what the rules did, for the process's metrics: a refusal by quota, a loop broken.
export type SendWatcher = { overQuota: (kind: 'message' | 'thread') => void; loopBroken: () => void };

export function governSends(sql: Sql, set: SendRules, watcher?: SendWatcher): void {
  rules.set(sql, { ...set, watcher });
}

export const sendRulesFor = (sql: Sql): SendRules => rules.get(sql) ?? DEFAULT_SEND_RULES;
