import type { Server } from 'bun';
import { Elysia } from 'elysia';
import type { Config } from '../config';
import type { Sql } from '../db/connect';
import { clientAddress } from '../web/person-session';
import { REGISTRATIONS_PER_HOUR, takeRegistrationSlot } from '../domain/oauth/oauth-connections';
import { countEarlyAnswer } from '../web/metrics';
import { answerNodeStyle } from './bridge';
import { MCP_SCOPE } from '../domain/oauth/oauth-connections';
import { OAUTH_ROUTES, requestingClient, type OAuthServer } from './provider';

const pathOf = (url: string) => url.slice(url.indexOf('/', url.indexOf('//') + 2)).split('?')[0]!;

const ENDPOINTS = Object.values(OAUTH_ROUTES);
const RESOURCE_METADATA = new Set(['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']);
const WELL_KNOWN = new Set([...RESOURCE_METADATA, '/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']);
// The route template of a path answered here, for the metrics: the endpoint, never a client id or
// an interaction uid that follows it (`/oauth/register/:id` is a client reading its registration,
// `/oauth/authorize/:id` a decided request resuming). Null for a path that is not ours.
function routeTemplate(path: string): string | null {
  if (WELL_KNOWN.has(path) || ENDPOINTS.includes(path)) return path;
  if (!path.startsWith('/oauth/')) return null;
  const endpoint = ENDPOINTS.find((route) => path.startsWith(`${route}/`) && !path.slice(route.length + 1).includes('/'));
  return endpoint ? `${endpoint}/:id` : 'unmatched';
}

// What the authorization server metadata may say. The library writes OpenID Connect's discovery
// document, which also names ID tokens, their claims and signing keys, and the library's endpoints
// for logout and pushed requests: none of those is offered here (docs/internals/decisions.md), so a client
// reading the document is told only of what it can use. `offline_access` is accepted in a request
// but not advertised: refresh tokens come with the refresh_token grant, whatever the scope.
const OFFERED_METADATA = [
  'issuer',
  'authorization_endpoint',
  'token_endpoint',
  'registration_endpoint',
  'revocation_endpoint',
  'response_types_supported',
  'response_modes_supported',
  'grant_types_supported',
  'token_endpoint_auth_methods_supported',
  'code_challenge_methods_supported',
  'authorization_response_iss_parameter_supported',
  'client_id_metadata_document_supported',
];

async function offeredOnly(response: Response): Promise<Response> {
  if (response.status !== 200 || !response.headers.get('content-type')?.startsWith('application/json')) return response;
  const document = (await response.json()) as Record<string, unknown>;
  const offered: Record<string, unknown> = Object.fromEntries(OFFERED_METADATA.filter((key) => key in document).map((key) => [key, document[key]]));
  offered.scopes_supported = [MCP_SCOPE];
  // The revocation endpoint authenticates clients as the token endpoint does.
  offered.revocation_endpoint_auth_methods_supported = offered.token_endpoint_auth_methods_supported;
  const headers = new Headers(response.headers);
  headers.delete('content-length');
  return new Response(JSON.stringify(offered), { status: 200, headers });
}

// The authorization server's endpoints (/oauth/…), its metadata, and the metadata of the resource
// it protects. They are answered before routing, so that Elysia never reads their bodies:
// oidc-provider parses its own (form-encoded token requests, JSON registrations). Nothing here is
// in the OpenAPI document: OAuth clients read the metadata documents instead.
export const authorizationServer = (sql: Sql, config: Config, oauth: OAuthServer | null) => {
  const app = new Elysia({ name: 'oauth-authorization-server' });
  if (!oauth) return app;
  const issuer = new URL(oauth.issuer);
  const handle = oauth.provider.callback();
  // RFC 9728: what /mcp is and who issues tokens for it. Both the root document and the one for
  // the /mcp path are served: clients try the path-specific one first.
  const resourceMetadata = JSON.stringify({
    resource: oauth.resource,
    authorization_servers: [oauth.issuer],
    scopes_supported: [MCP_SCOPE],
    bearer_methods_supported: ['header'],
    resource_name: 'Agent Messaging Service',
  });
  async function answer(path: string, request: Request, server: Server<unknown> | null): Promise<Response | undefined> {
    const client = clientAddress(request, server, config);
    if (path === '/oauth/register' && request.method === 'POST' && !(await takeRegistrationSlot(sql, client))) {
      return Response.json(
        {
          error: 'temporarily_unavailable',
          error_description: `Too many client registrations from this address (at most ${REGISTRATIONS_PER_HOUR} an hour); try again later.`,
        },
        { status: 429, headers: { 'retry-after': '3600', 'cache-control': 'no-store' } },
      );
    }
    if (path.startsWith('/oauth/')) return requestingClient.run(client, () => answerNodeStyle(handle, request, issuer));
    // RFC 8414 names the document differently from OpenID Connect Discovery; clients try both.
    if (path === '/.well-known/oauth-authorization-server' || path === '/.well-known/openid-configuration') {
      const asDiscovery = new Request(new URL('/.well-known/openid-configuration', request.url).href, {
        method: request.method,
        headers: request.headers,
      });
      return offeredOnly(await answerNodeStyle(handle, asDiscovery, issuer));
    }
    if (RESOURCE_METADATA.has(path)) {
      if (request.method !== 'GET' && request.method !== 'HEAD' && request.method !== 'OPTIONS') return;
      return new Response(request.method === 'OPTIONS' ? null : resourceMetadata, {
        status: request.method === 'OPTIONS' ? 204 : 200,
        // Browser-based MCP clients read it from another origin.
        headers: {
          'content-type': 'application/json',
          'access-control-allow-origin': '*',
          'access-control-allow-methods': 'GET',
          'cache-control': 'public, max-age=3600',
        },
      });
    }
  }

  return app.onRequest(async ({ request, server }) => {
    const path = pathOf(request.url);
    const route = routeTemplate(path);
    if (route === null) return;
    const response = await answer(path, request, server);
    if (response) countEarlyAnswer(request, route, response.status);
    return response;
  });
};
