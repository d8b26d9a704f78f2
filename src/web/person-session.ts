import { Elysia } from 'elysia';
import type { Server } from 'bun';
import type { Config } from '../config';
import type { Sql } from '../db/connect';
import { sessionPerson, type Person } from '../domain/people/people';
import { lowerBodyLimit, readJsonBody } from './body';
import { CSRF_HEADER, CSRF_VALUE, DASHBOARD_PATH } from './dashboard-protocol';
import { KernelRefusal } from './failure';

export const SESSION_COOKIE = 'ams_session';

// The sign-in routes are open to anyone and take an email and a code: far below the server's body
// limit, which would let every anonymous request make the server parse up to a megabyte.
const VISITOR_BODY_LIMIT_BYTES = 4096;

export function sessionToken(request: Request): string | null {
  const header = request.headers.get('cookie');
  return header ? (new Bun.CookieMap(header).get(SESSION_COOKIE) ?? null) : null;
}

// Secure whenever the person reached us over HTTPS, directly or through a TLS-terminating proxy.
function overHttps(request: Request, config: Config): boolean {
  return (
    new URL(request.url).protocol === 'https:' ||
    request.headers.get('x-forwarded-proto')?.split(',')[0]?.trim() === 'https' ||
    !!config.PUBLIC_URL?.startsWith('https:')
  );
}

export function sessionCookie(request: Request, config: Config, token: string, maxAgeSeconds: number): string {
  return new Bun.Cookie(SESSION_COOKIE, token, {
    path: DASHBOARD_PATH,
    httpOnly: true,
    sameSite: 'lax',
    secure: overHttps(request, config),
    maxAge: maxAgeSeconds,
  }).serialize();
}

export const clearedSessionCookie = (request: Request, config: Config) => sessionCookie(request, config, '', 0);

// The address sign-in limits are counted against. Behind a proxy every request comes from the
// proxy, so with TRUST_PROXY the address the proxy appended last is used instead.
export function clientAddress(request: Request, server: Server<unknown> | null, config: Config): string {
  if (config.TRUST_PROXY) {
    const forwarded = request.headers.get('x-forwarded-for')?.split(',').at(-1)?.trim();
    if (forwarded) return forwarded;
  }
  return server?.requestIP(request)?.address ?? 'unknown';
}

function sameOrigin(origin: string, request: Request, config: Config): boolean {
  if (config.PUBLIC_URL && origin === new URL(config.PUBLIC_URL).origin) return true;
  try {
    return new URL(origin).host === (request.headers.get('host') ?? new URL(request.url).host);
  } catch {
    return false;
  }
}

function refuseCrossSite(request: Request, config: Config) {
  if (request.method === 'GET' || request.method === 'HEAD') return;
  if (request.headers.get(CSRF_HEADER) !== CSRF_VALUE) {
    throw new KernelRefusal(
      'forbidden',
      `Cross-site request refused: dashboard requests that change state must send ${CSRF_HEADER}: ${CSRF_VALUE}.`,
      'cross_site',
    );
  }
  const site = request.headers.get('sec-fetch-site');
  const origin = request.headers.get('origin');
  if ((site && site !== 'same-origin') || (origin && !sameOrigin(origin, request, config))) {
    throw new KernelRefusal('forbidden', 'Cross-site request refused: the request did not come from this dashboard.', 'cross_site');
  }
}

export function refuseAgentKeys(request: Request) {
  if (request.headers.has('authorization')) {
    throw new KernelRefusal('unauthorized', 'Agent keys are not accepted on the dashboard; a person signs in with an emailed code.', 'agent_key');
  }
}

const checked = new WeakMap<Request, Promise<Person | null>>();

// Runs once per request: agent keys are refused, then (for `person`) the session, then the
// cross-site check. It runs in the parse hook, so a refused caller never gets its body read.
function admit(sql: Sql, config: Config, request: Request, needSession: boolean): Promise<Person | null> {
  let result = checked.get(request);
  if (!result) {
    result = (async () => {
      refuseAgentKeys(request);
      const person = needSession ? await sessionPerson(sql, sessionToken(request)) : null;
      if (needSession && !person) throw new KernelRefusal('unauthorized', 'Sign in first: there is no session, or it has expired.', 'no_session');
      refuseCrossSite(request, config);
      return person;
    })();
    checked.set(request, result);
  }
  return result;
}

// `person: true` admits a signed-in person and resolves them; `visitor: true` admits anyone
// without an agent key (the sign-in routes). Both refuse cross-site state changes.
export const dashboardGuard = (sql: Sql, config: Config) =>
  new Elysia({ name: 'dashboard-guard' }).macro({
    person: {
      async parse({ request }) {
        await admit(sql, config, request, true);
        return readJsonBody(request);
      },
      async transform({ request }) {
        await admit(sql, config, request, true);
      },
      async resolve({ request }) {
        return { person: (await admit(sql, config, request, true))! };
      },
    },
    visitor: {
      async parse({ request }) {
        await admit(sql, config, request, false);
        lowerBodyLimit(request, VISITOR_BODY_LIMIT_BYTES);
        return readJsonBody(request);
      },
      async transform({ request }) {
        await admit(sql, config, request, false);
      },
    },
  });
