import { Elysia } from 'elysia';
import { bodyField } from '../web/body';
import type { Config } from '../config';
import type { Sql } from '../db/connect';
import { invalid, notFound } from '../domain/shared/errors';
import { choosableAgents, connectClient, findActiveAgentNamed, MCP_SCOPE } from '../domain/oauth/oauth-connections';
import { byPerson } from '../domain/people/audit';
import { dashboardGuard } from '../web/person-session';
import { ok } from '../web/envelope';
import { requestLog } from '../web/request-id';
import type { Logger } from '../log';
import { nodeRequest } from './bridge';
import { type OAuthServer } from './provider';

export const EXPIRED_REQUEST =
  'This authorization request has expired or was started in another browser; start connecting again from the client.';

// The dashboard's half of an authorization: the page at /dashboard/authorize/<uid> (pages.ts) reads
// the request and sends a person's decision here. These routes live under the page's path because
// oidc-provider ties the request to the browser that started it with a cookie scoped to that path
// (a request opened in one browser cannot be approved from another); the person's session, the
// dashboard's cross-site checks and its refusal of agent keys apply as on every dashboard route.
export const consentRoutes = (sql: Sql, config: Config, log: Logger, oauth: OAuthServer | null) => {
  const app = new Elysia({ name: 'oauth-consent', prefix: '/dashboard/authorize' });
  if (!oauth) return app;
  const { provider, resource } = oauth;
  const issuer = new URL(oauth.issuer);

  const interaction = async (request: Request) => {
    const { req, res } = nodeRequest(request, issuer, false);
    try {
      return { details: await provider.interactionDetails(req, res), req, res };
    } catch {
      throw notFound(EXPIRED_REQUEST);
    }
  };

  return app
    .use(dashboardGuard(sql, config))
    .onAfterHandle(({ set }) => {
      set.headers['cache-control'] = 'no-store';
    })
    .get(
      '/:uid/request',
      async ({ request, params }) => {
        const { details } = await interaction(request);
        if (details.uid !== params.uid) throw notFound(EXPIRED_REQUEST);
        const client = await provider.Client.find(String(details.params.client_id));
        if (!client) throw notFound(EXPIRED_REQUEST);
        return ok({
          uid: details.uid,
          client: {
            clientId: client.clientId,
            name: client.clientName ?? null,
            uri: client.clientUri ?? null,
            redirectUri: String(details.params.redirect_uri),
            // Named by the https address of its metadata document rather than registered here.
            metadataDocument: Boolean((client as { clientIdMetadataDocument?: boolean }).clientIdMetadataDocument),
          },
          resource,
          agents: await choosableAgents(sql),
        });
      },
      { person: true },
    )
    .post(
      '/:uid/decision',
      async ({ request, params, body, person }) => {
        const { details, req, res } = await interaction(request);
        if (details.uid !== params.uid) throw notFound(EXPIRED_REQUEST);
        const decision = bodyField(body, 'decision');
        if (decision === 'deny') {
          const redirectTo = await provider.interactionResult(
            req,
            res,
            { error: 'access_denied', error_description: 'A person declined the request on the dashboard.' },
            { mergeWithLastSubmission: false },
          );
          requestLog(log, request).info('oauth_request_denied', { clientId: String(details.params.client_id), person: person.username });
          return ok({ redirectTo });
        }
        if (decision !== 'approve') throw invalid('decision: must be "approve" or "deny".', 'decision');
        const agent = await findActiveAgentNamed(sql, bodyField(body, 'agent'));
        const clientId = String(details.params.client_id);
        const client = await provider.Client.find(clientId);
        if (!client) throw notFound(EXPIRED_REQUEST);
        // The grant covers what was asked of the scopes this server knows (`mcp` is also one of the
        // server's own scopes, so that clients may register with it), and `mcp` on /mcp.
        const grant = new provider.Grant({ accountId: person.id, clientId });
        const asked = String(details.params.scope ?? '').split(' ').filter((s) => s === MCP_SCOPE || s === 'offline_access');
        if (asked.length > 0) grant.addOIDCScope(asked.join(' '));
        grant.addResourceScope(resource, MCP_SCOPE);
        const grantId = await grant.save();
        try {
          await connectClient(sql, byPerson(person), {
            grantId,
            clientId,
            clientName: client.clientName ?? null,
            clientUri: client.clientUri ?? null,
            agentId: agent.id,
            personId: person.id,
          });
        } catch (error) {
          await grant.destroy();
          throw error;
        }
        const redirectTo = await provider.interactionResult(
          req,
          res,
          { login: { accountId: person.id, remember: false }, consent: { grantId } },
          { mergeWithLastSubmission: false },
        );
        requestLog(log, request).info('oauth_client_connected', { clientId, agent: agent.username, person: person.username });
        return ok({ redirectTo });
      },
      { person: true },
    );
};
