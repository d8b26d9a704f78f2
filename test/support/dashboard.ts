import { beforeAll } from 'bun:test';
import { randomBytes } from 'node:crypto';
import { invitePerson } from '../../src/domain/people/people';
import { buildApp, type App } from '../../src/app';
import { createLogger } from '../../src/log';
import { callApp, useHarness, type Harness, type Reply } from './harness';
import { BY_CLI } from '../../src/domain/people/audit';

export type CallOptions = {
  cookie?: string | null;
  body?: unknown;
  headers?: Record<string, string>;
  // The header the dashboard's script sends; on by default, switched off to test the refusal.
  csrf?: boolean;
  client?: string;
};

export type DashboardHarness = Harness & {
  dash: App;
  logLines: Record<string, any>[];
  send: (method: string, path: string, opts?: CallOptions) => Promise<Reply>;
  lastCode: (email: string) => string | undefined;
  invite: (email: string, username: string) => Promise<void>;
  signIn: (email: string) => Promise<string>;
};

const randomClient = () => `198.51.100.${randomBytes(1)[0]}-${randomBytes(4).toString('hex')}`;

// The harness plus an app whose log is kept (sign-in codes are logged when SMTP is not set up),
// and helpers that speak to the dashboard API the way its pages do. Each call comes from a fresh
// client address unless told otherwise, so that per-address sign-in limits do not leak between tests.
export function useDashboardHarness(env: Record<string, string> = {}, { worker = false } = {}): DashboardHarness {
  const h = useHarness({ TRUST_PROXY: 'true', ...env }, { worker }) as DashboardHarness;
  beforeAll(() => {
    h.logLines = [];
    const log = createLogger('debug', (line) => h.logLines.push(JSON.parse(line)));
    h.dash = buildApp({ sql: h.db.sql, config: h.config, log, inboxSignal: h.inboxSignal, agentCache: h.agentCache, oauth: h.service.oauth });
    h.send = async (method, path, opts = {}) => {
      const headers: Record<string, string> = { 'x-forwarded-for': opts.client ?? randomClient(), ...opts.headers };
      if (opts.csrf !== false && method !== 'GET') headers['x-requested-with'] = 'fetch';
      if (opts.cookie) headers.cookie = opts.cookie;
      return callApp(h.dash, method, path, { headers, body: opts.body });
    };
    h.lastCode = (email) => h.logLines.findLast((l) => l.event === 'sign_in_code' && l.email === email)?.code;
    h.invite = async (email, username) => {
      await invitePerson(h.db.sql, BY_CLI, { email, username });
    };
    h.signIn = async (email) => {
      await h.send('POST', '/dashboard/api/sign-in/code', { body: { email } });
      const res = await h.send('POST', '/dashboard/api/sign-in/verify', { body: { email, code: h.lastCode(email) } });
      if (res.status !== 200) throw new Error(`sign-in failed: ${JSON.stringify(res.body)}`);
      return sessionCookieOf(res);
    };
  });
  return h;
}

export function sessionCookieOf(res: Reply): string {
  const header = res.headers.get('set-cookie') ?? '';
  return header.split(';')[0]!;
}
