import { AsyncLocalStorage } from 'node:async_hooks';
import type Provider from 'oidc-provider';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { webhookUrlPolicy, type Config } from '../config';
import type { Sql } from '../db/connect';
import { escapeHtml } from '../web/html';
import { pageHeaders } from '../web/page-headers';
import { findPerson, MCP_SCOPE, takeRegistrationSlot } from '../domain/oauth/oauth-connections';
import type { Logger } from '../log';
import { artifactStore } from './adapter';
import { authorizationServerKeys } from './keys';
import { outboundFetch } from './outbound-fetch';

// The one scope a client asks for: acting as an agent over MCP. A token carries it only for /mcp.
export type OAuthServer = {
  provider: Provider;
  // PUBLIC_URL: the issuer, and the origin of every endpoint below.
  issuer: string;
  // The resource a token is bound to (RFC 8707): this service's /mcp.
  resource: string;
  // The protected-resource metadata (RFC 9728) that a 401 from /mcp points to.
  resourceMetadataUrl: string;
  accessTokenTtlSeconds: number;
};

// The address of the client whose request the authorization server is answering (routes.ts runs
// each request in it), for the per-address limit on registrations.
export const requestingClient = new AsyncLocalStorage<string>();

// The authorization server is oidc-provider, kept in our database (adapter.ts) and mounted in this
// service (routes.ts). OAuth is offered when PUBLIC_URL is set: the issuer and the resource must be
// the absolute addresses clients reach, the same through every instance and proxy.
export async function createOAuthServer(sql: Sql, config: Config, log: Logger): Promise<OAuthServer | null> {
  if (!config.PUBLIC_URL) return null;
  const publicUrl = new URL(config.PUBLIC_URL);
  // The endpoints are mounted at the root; behind a proxy that adds a path they would not be where
  // the metadata says.
  if (publicUrl.pathname !== '/') {
    log.warn('oauth_not_offered', { reason: 'PUBLIC_URL has a path; OAuth sign-in needs the service at the root of its address.' });
    return null;
  }
  const { default: Provider, errors, interactionPolicy } = await loadOidcProvider(log);
  const issuer = publicUrl.origin;
  const resource = `${issuer}/mcp`;
  const keys = await authorizationServerKeys(sql);
  const accessTokenTtlSeconds = config.OAUTH_ACCESS_TOKEN_TTL_S;

  // Every authorization is decided by a person on the dashboard, even when the browser still holds
  // a session of the authorization server from an earlier one: the person picks the agent each time.
  // The server's account is that person; the agent is bound to the grant (its connection).
  const policy = interactionPolicy.base();
  policy
    .get('login')!
    .checks.add(
      new interactionPolicy.Check('person_decides', 'a person approves every authorization on the dashboard', (ctx) =>
        ctx.oidc.result?.login ? interactionPolicy.Check.NO_NEED_TO_PROMPT : interactionPolicy.Check.REQUEST_PROMPT,
      ),
    );

  const outbound = outboundFetch(webhookUrlPolicy(config));
  const provider = new Provider(issuer, {
    adapter: artifactStore(sql),
    jwks: keys.jwks,
    cookies: { keys: keys.cookieKeys },
    clients: [],
    scopes: [MCP_SCOPE, 'offline_access'],
    responseTypes: ['code'],
    clientDefaults: {
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      id_token_signed_response_alg: 'ES256',
    },
    pkce: { required: () => true },
    // Public clients (the MCP norm) and clients with a secret, sent in the header or the body
    // (claude.ai's connectors register with client_secret_post); not the JWT-based methods, which
    // would have this server fetch and trust a client's keys.
    clientAuthMethods: ['none', 'client_secret_basic', 'client_secret_post'],
    fetch: outbound.fetch,
    features: {
      devInteractions: { enabled: false },
      // Off, as the library would otherwise offer them: tokens bound to a DPoP key (/mcp checks
      // bearer tokens only, so a client would believe its token bound when it is not), logout of
      // the authorization server's own session (it holds no sign-in: every authorization asks a
      // person), and pushed authorization requests (no client here needs them).
      dPoP: { enabled: false },
      rpInitiatedLogout: { enabled: false },
      pushedAuthorizationRequests: { enabled: false },
      registration: { enabled: true },
      // A client may also name itself by the https address of its metadata document (the MCP
      // specification's preferred way, 2025-11-25): no registration, the document is fetched when
      // the client comes (outbound-fetch.ts) and kept as long as its Cache-Control says, from 30 s
      // to a day.
      // Fetching a document not yet cached counts against the same per-address limit as a
      // registration: either way, anyone may make this server do work for a client it never met.
      clientIdMetadataDocument: {
        enabled: true,
        ack: 'draft-02',
        allowFetch: async (_ctx, clientId) => {
          const client = requestingClient.getStore();
          return client === undefined || outbound.failedRecently(clientId) || (await takeRegistrationSlot(sql, client));
        },
      },
      // A client signs out only what was issued to it (RFC 7009: others' tokens are ignored).
      revocation: { enabled: true, allowedPolicy: async (_ctx, client, token) => token.clientId === client.clientId },
      userinfo: { enabled: false },
      resourceIndicators: {
        enabled: true,
        // MCP clients send `resource`; one that does not still gets a token for /mcp only.
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, indicator) => {
          if (indicator !== resource) throw new errors.InvalidTarget(`This server issues tokens only for ${resource}.`);
          return { scope: MCP_SCOPE, audience: resource, accessTokenTTL: accessTokenTtlSeconds, accessTokenFormat: 'opaque' };
        },
      },
    },
    routes: OAUTH_ROUTES,
    interactions: {
      policy,
      url: (_ctx, interaction) => `/dashboard/authorize/${interaction.uid}`,
    },
    ttl: {
      AccessToken: accessTokenTtlSeconds,
      AuthorizationCode: 60,
      Interaction: 600,
      Session: 600,
      Grant: config.OAUTH_REFRESH_TOKEN_TTL_S,
      RefreshToken: config.OAUTH_REFRESH_TOKEN_TTL_S,
    },
    // Refresh tokens for every client registered for them (MCP hosts rarely ask offline_access),
    // rotated at every use; a rotated one used again ends the grant (oidc-provider's reuse rule).
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    rotateRefreshToken: () => true,
    findAccount: async (_ctx, id) => {
      const person = await findPerson(sql, id);
      return person ? { accountId: person.id, claims: () => ({ sub: person.id }) } : undefined;
    },
    renderError: (ctx: KoaContextWithOIDC, out) => errorPage(ctx, out),
  });
  provider.on('server_error', (_ctx, error) => log.error('oauth_server_error', { error: String(error) }));
  // Why a client's metadata document was refused, for the operator: the person's browser and the
  // client get the library's sentence only. The document is fetched when the client is first looked
  // up, at authorization, or at a token request once the cached copy has expired.
  const metadataRefused = (ctx: KoaContextWithOIDC, error: Error & { error_description?: string; error_detail?: string }) => {
    if (!error.error_description?.startsWith('client_id metadata document')) return;
    log.warn('oauth_client_metadata_refused', { url: String(ctx.oidc?.params?.client_id ?? ''), reason: error.error_detail ?? error.error_description });
  };
  provider.on('authorization.error', metadataRefused);
  provider.on('grant.error', metadataRefused);
  return { provider, issuer, resource, resourceMetadataUrl: `${issuer}/.well-known/oauth-protected-resource/mcp`, accessTokenTtlSeconds };
}

// Every endpoint is below /oauth/, the features this server leaves off included, so that none
// lands on a path the service uses for something else.
export const OAUTH_ROUTES = {
  authorization: '/oauth/authorize',
  token: '/oauth/token',
  registration: '/oauth/register',
  revocation: '/oauth/revoke',
  jwks: '/oauth/jwks',
  end_session: '/oauth/session/end',
  pushed_authorization_request: '/oauth/par',
  code_verification: '/oauth/device',
  device_authorization: '/oauth/device/auth',
  backchannel_authentication: '/oauth/backchannel',
  introspection: '/oauth/introspect',
  userinfo: '/oauth/me',
};

// oidc-provider warns when imported that it was written for Node.js LTS and names Bun unsupported,
// and, at its first outgoing request, that its guard against private addresses (which needs Node's
// undici) is off; its flows run under Bun in this project's tests (test/oauth*.test.ts), and its
// outgoing requests are guarded by outbound-fetch.ts instead. Its notices go to the structured log,
// at debug level, instead of unstructured lines on stderr; the library is only loaded where OAuth
// is offered.
async function loadOidcProvider(log: Logger) {
  libraryLog = log;
  if (!routed) {
    routed = true;
    const warn = console.warn;
    console.warn = (...args: unknown[]) => {
      if (libraryLog && LIBRARY_NOTICE.test(String(args[0]))) libraryLog.debug('oauth_library_notice', { text: args.map(String).join(' ') });
      else warn(...args);
    };
  }
  return import('oidc-provider');
}
// Every notice of the library begins with its name (after a colour code on a terminal).
const LIBRARY_NOTICE = /^(\x1b\[[\d;]*m)?oidc-provider /;
let routed = false;
let libraryLog: Logger | null = null;

// What a person's browser shows when a request cannot go back to its client (an unknown client, a
// redirect URI not registered, a request already decided or expired): the dashboard's look and
// the headers of every page of ours (it carries no script), the library's sentence, and what to do.
function errorPage(ctx: KoaContextWithOIDC, out: { error: string; error_description?: string }) {
  ctx.set(pageHeaders());
  ctx.set('cache-control', 'no-store');
  ctx.type = 'html';
  const sentence = out.error_description ?? 'The authorization request was refused.';
  ctx.body = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Connecting a client · Agent Messaging Service</title>
<link rel="stylesheet" href="/dashboard/assets/dashboard.css">
</head>
<body>
<main id="main">
<section class="card narrow">
<h1>This connection cannot go on</h1>
<p class="error">${escapeHtml(sentence.endsWith('.') ? sentence : `${sentence}.`)}</p>
<p class="hint">Start connecting again from the client. If this keeps happening, the client may be sending a request this service does not accept (error <code>${escapeHtml(out.error)}</code>).</p>
</section>
</main>
</body>
</html>
`;
}
