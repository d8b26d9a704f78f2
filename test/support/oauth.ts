import { createHash, randomBytes } from 'node:crypto';
import type { DashboardHarness } from './dashboard';
import { callApp, type Reply } from './harness';

// A browser's cookies for one site, enough for the authorization flow: set, replaced, cleared.
export function cookieJar() {
  const cookies = new Map<string, string>();
  return {
    absorb(res: { headers: Headers }) {
      for (const line of res.headers.getSetCookie()) {
        const [pair, ...attributes] = line.split(';');
        const at = pair!.indexOf('=');
        const name = pair!.slice(0, at).trim();
        const value = pair!.slice(at + 1).trim();
        const expired = attributes.some((a) => /^\s*expires=/i.test(a) && new Date(a.split('=')[1]!).getTime() < Date.now());
        if (value === '' || expired) cookies.delete(name);
        else cookies.set(name, value);
      }
    },
    header: (extra?: string) => [...[...cookies].map(([n, v]) => `${n}=${v}`), ...(extra ? [extra] : [])].join('; '),
    has: (name: string) => cookies.has(name),
  };
}

export const pkcePair = () => {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
};

// An MCP host's side of the flow, driven through app.handle() as a person's browser and the host's
// server would drive it.
export function oauthClient(h: DashboardHarness, publicUrl: string) {
  const resource = `${publicUrl}/mcp`;
  let registrations = 0;
  const path = (location: string) => {
    const url = new URL(location, publicUrl);
    return url.origin === new URL(publicUrl).origin ? url.pathname + url.search : null;
  };
  const form = (fields: Record<string, string>) => ({
    raw: new URLSearchParams(fields).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });

  // Each registration from its own address (the harness trusts X-Forwarded-For), so that the
  // per-address limit on registration is met only where a test means to meet it.
  async function register(redirectUri = 'https://client.example/callback', extra: Record<string, unknown> = {}, from = `203.0.113.${++registrations}`) {
    const res = await callApp(h.dash, 'POST', '/oauth/register', {
      headers: { 'x-forwarded-for': from },
      body: {
        redirect_uris: [redirectUri],
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        client_name: 'Test Host',
        scope: 'mcp',
        ...extra,
      },
    });
    if (res.status !== 201) throw new Error(`registration failed: ${res.status} ${JSON.stringify(res.body)}`);
    return { clientId: res.body.client_id as string, redirectUri, secret: res.body.client_secret as string | undefined };
  }

  // Opens an authorization in a fresh browser: the answer, and the browser's cookies.
  async function authorize(client: { clientId: string; redirectUri: string }, params: Record<string, string | null> = {}) {
    const pkce = pkcePair();
    const state = randomBytes(8).toString('hex');
    const query = new URLSearchParams();
    const all: Record<string, string | null> = {
      response_type: 'code',
      client_id: client.clientId,
      redirect_uri: client.redirectUri,
      code_challenge: pkce.challenge,
      code_challenge_method: 'S256',
      state,
      scope: 'mcp',
      resource,
      ...params,
    };
    for (const [k, v] of Object.entries(all)) if (v !== null) query.set(k, v);
    const jar = cookieJar();
    const res = await callApp(h.dash, 'GET', `/oauth/authorize?${query}`);
    jar.absorb(res);
    const location = res.headers.get('location');
    const uid = location?.match(/^\/dashboard\/authorize\/([^/?]+)$/)?.[1] ?? null;
    return { res, location, uid, jar, pkce, state };
  }

  // The person's decision on the consent page, then the browser following the redirects back to
  // the client: the client's redirect URI with its query.
  async function decide(
    flow: Awaited<ReturnType<typeof authorize>>,
    session: string,
    body: Record<string, unknown>,
  ): Promise<{ decision: Reply; callback: URL | null }> {
    const decision = await h.send('POST', `/dashboard/authorize/${flow.uid}/decision`, { cookie: flow.jar.header(session), body });
    if (decision.status !== 200) return { decision, callback: null };
    let next: string | null = decision.body.data.redirectTo;
    for (let hops = 0; hops < 5 && next; hops++) {
      const local = path(next);
      if (!local) return { decision, callback: new URL(next) };
      const res = await callApp(h.dash, 'GET', local, { headers: { cookie: flow.jar.header() } });
      flow.jar.absorb(res);
      next = res.headers.get('location');
      if (res.status !== 302 && res.status !== 303) throw new Error(`expected a redirect from ${local}, got ${res.status}: ${JSON.stringify(res.body)}`);
    }
    throw new Error('the authorization never came back to the client');
  }

  const token = (fields: Record<string, string>) => callApp(h.dash, 'POST', '/oauth/token', form(fields));

  async function exchange(client: { clientId: string; redirectUri: string }, code: string, verifier: string) {
    return token({
      grant_type: 'authorization_code',
      code,
      redirect_uri: client.redirectUri,
      client_id: client.clientId,
      code_verifier: verifier,
      resource,
    });
  }

  // Register, authorize, approve as `agent`, exchange: a working pair of tokens.
  async function connect(session: string, agent: string) {
    const client = await register();
    const flow = await authorize(client);
    const { callback } = await decide(flow, session, { decision: 'approve', agent });
    const res = await exchange(client, callback!.searchParams.get('code')!, flow.pkce.verifier);
    if (res.status !== 200) throw new Error(`token exchange failed: ${res.status} ${JSON.stringify(res.body)}`);
    return { client, accessToken: res.body.access_token as string, refreshToken: res.body.refresh_token as string };
  }

  const mcp = (accessToken: string, body: unknown = { jsonrpc: '2.0', id: 1, method: 'tools/list' }) =>
    callApp(h.dash, 'POST', '/mcp', {
      headers: { authorization: `Bearer ${accessToken}`, accept: 'application/json, text/event-stream' },
      body,
    });

  return { resource, register, authorize, decide, token, exchange, connect, mcp, form };
}
