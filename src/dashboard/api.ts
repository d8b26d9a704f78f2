import { Elysia } from 'elysia';
import { bodyField } from '../web/body';
import { endpointHealthRule, webhookUrlPolicy, type Config } from '../config';
import type { AgentCache } from '../db/agent-cache';
import type { Reads, Sql } from '../db/connect';
import { agentListing, agentPage, listAgents, revealSigningSecret, webhookTroubleOf } from '../domain/agents/agent-overview';
import { createAgent, removeWebhook, setArchived, setCardListed, setWebhook } from '../domain/agents/agents';
import { enableWebhook, pauseWebhook, resumeWebhook } from '../domain/agents/webhook-switch';
import { setProfile } from '../domain/agents/directory';
import { agentsOnline } from '../domain/agents/presence';
import { agentGovernance, setAgentHolds, setSendQuotas } from '../domain/agents/governance';
import { sendTestEvent } from '../domain/agents/test-events';
import { endpointSeries, seriesHours } from '../domain/agents/endpoint-series';
import { overview, troublePage } from '../domain/deliveries/overview';
import { rotateSigningSecret } from '../domain/agents/signing-secrets';
import { attention } from '../domain/deliveries/attention';
import { failedInView, listDeliveries } from '../domain/deliveries/delivery-progress';
import { deliveryFilter } from '../domain/deliveries/delivery-query';
import { resendDelivery, resendFailed } from '../domain/deliveries/delivery-steps';
import { pageQuery, timeKeyedPageQuery } from '../domain/shared/keyset';
import { postMessage } from '../domain/messages/messages';
import { approveAllFrom, approveHeld, rejectHeld, waitingPage, type Decided } from '../domain/messages/holds';
import { disconnectClient } from '../domain/oauth/oauth-connections';
import { endSession, personActor, requestSignInCode, verifySignInCode, type CodeSender } from '../domain/people/people';
import { searchText } from '../domain/shared/search';
import { auditFilter, byPerson, listDecisions } from '../domain/people/audit';
import { addOperatorWebhook, listOperatorWebhooks, removeOperatorWebhook, sendTestNotice } from '../domain/people/operator-webhooks';
import { searchingIf, type SearchGate } from '../domain/shared/search-gate';
import { resumeThread, setThreadHolds } from '../domain/threads/thread-holds';
import { listThreadsPage, threadFilter, threadForPeople, threadMessages } from '../domain/threads/thread-overview';
import { fileForPeople } from '../domain/files/files';
import { fileResponse } from '../web/file-response';
import { addParticipant, confirmClose, declineClose, removeParticipant } from '../domain/threads/threads';
import { contactPolicy, removeContact, setContact, setContactPolicy } from '../domain/agents/contact-policy';
import { createKey, keysOf, revokeKey } from '../domain/agents/agent-keys';
import { DASHBOARD_API, STREAM_PATH } from '../web/dashboard-protocol';
import { ok } from '../web/envelope';
import { requestLog } from '../web/request-id';
import type { Logger } from '../log';
import type { Metrics } from '../metrics';
import { deliveryEvents, type DeliveryFeed } from './feed';
import { clearedSessionCookie, clientAddress, dashboardGuard, sessionCookie, sessionToken } from '../web/person-session';
import type { SessionStreams } from './session-streams';

export type DashboardDeps = {
  sql: Sql;
  // Where the lists and the Overview read (they may lag: db/reads.ts).
  reads: Reads;
  config: Config;
  log: Logger;
  metrics: Metrics;
  searches: SearchGate;
  // A key revoked here is refused by this instance's next request, before the database's notice.
  agentCache: AgentCache;
  sendCode: CodeSender;
  feed: DeliveryFeed;
  streams: SessionStreams;
};

// The dashboard's private JSON API: sessions only, unversioned, left out of the public OpenAPI
// document. Each route is a thin call into the domain, as in every other door.
export const dashboardApi = ({ sql, reads, config, log, metrics, searches, agentCache, sendCode, feed, streams }: DashboardDeps) => {
  const policy = webhookUrlPolicy(config);
  const healthRule = endpointHealthRule(config);
  const counted = (decided: Decided) => {
    metrics.holdDecisions({ approved: decided.approved.length, rejected: decided.rejected.length });
    return decided;
  };
  return new Elysia({ name: 'dashboard-api', prefix: DASHBOARD_API })
    .use(dashboardGuard(sql, config))
    .onAfterHandle(({ set }) => {
      set.headers['cache-control'] = 'no-store';
    })
    .post('/sign-in/code', async ({ body, request, server }) =>
      ok(await requestSignInCode(sql, sendCode, body, clientAddress(request, server, config))),
      { visitor: true },
    )
    .post(
      '/sign-in/verify',
      async ({ body, request, server, set }) => {
        const signedIn = await verifySignInCode(sql, body, clientAddress(request, server, config), config.SESSION_TTL_MS);
        set.headers['set-cookie'] = sessionCookie(request, config, signedIn.token, signedIn.maxAgeSeconds);
        return ok(signedIn.person);
      },
      { visitor: true },
    )
    .post(
      '/sign-out',
      async ({ request, set }) => {
        const token = sessionToken(request)!;
        const done = await endSession(sql, token);
        streams.end(token, 'signed-out');
        set.headers['set-cookie'] = clearedSessionCookie(request, config);
        return ok(done);
      },
      { person: true },
    )
    .get('/me', ({ person }) => ok({ email: person.email, username: person.username }), { person: true })
    .get('/attention', async () => ok(await attention(sql, config.STALLED_AFTER_MS)), { person: true })
    .get('/overview', async () => ok(await overview(reads, healthRule)), { person: true })
    .get('/overview/trouble', async ({ query }) => ok(await troublePage(reads, query, healthRule)), { person: true })
    .get('/holds', async ({ query }) => ok(await waitingPage(sql, query)), { person: true })
    .post(
      '/holds/approve',
      async ({ body, person, request }) => ok(counted(await approveHeld(sql, requestLog(log, request), byPerson(person), bodyField(body, 'messageIds')))),
      { person: true },
    )
    .post(
      '/holds/reject',
      async ({ body, person }) => ok(counted(await rejectHeld(sql, byPerson(person), bodyField(body, 'messageIds'), bodyField(body, 'reason')))),
      { person: true },
    )
    .post(
      '/holds/approve-all',
      async ({ body, person, request }) => ok(counted(await approveAllFrom(sql, requestLog(log, request), byPerson(person), bodyField(body, 'sender')))),
      { person: true },
    )
    .get(
      '/agents',
      async ({ query }) => {
        const listing = agentListing(query, searchText(query.q));
        return ok(await listAgents(reads, listing, agentPage(query, listing), healthRule));
      },
      { person: true },
    )
    .get('/webhook-trouble', async ({ query }) => ok(await webhookTroubleOf(sql, query.agents, healthRule)), { person: true })
    .post(
      '/agents',
      async ({ body, person, set }) => {
        const webhookUrl = bodyField(body, 'webhookUrl');
        const created = await createAgent(
          sql,
          byPerson(person),
          { username: bodyField(body, 'username'), webhookUrl: webhookUrl === undefined || webhookUrl === '' ? undefined : String(webhookUrl) },
          policy,
        );
        set.status = 201;
        return ok(created);
      },
      { person: true },
    )
    .put('/agents/:username/profile', async ({ params, body, person }) => ok(await setProfile(sql, byPerson(person), params.username, body)), { person: true })
    .get('/presence', async () => ok({ online: await agentsOnline(sql) }), { person: true })
    .post('/agents/:username/archive', async ({ params, person }) => ok(await setArchived(sql, byPerson(person), params.username, true)), { person: true })
    .post('/agents/:username/unarchive', async ({ params, person }) => ok(await setArchived(sql, byPerson(person), params.username, false)), {
      person: true,
    })
    .put(
      '/agents/:username/webhook',
      async ({ params, body, person }) => ok(await setWebhook(sql, byPerson(person), params.username, bodyField(body, 'webhookUrl') as string, policy)),
      { person: true },
    )
    .delete(
      '/connections/:grantId',
      async ({ params, person, request }) => {
        const done = await disconnectClient(sql, byPerson(person), params.grantId);
        requestLog(log, request).info('oauth_client_disconnected', { grantId: params.grantId, person: person.username });
        return ok(done);
      },
      { person: true },
    )
    .delete('/agents/:username/webhook', async ({ params, person }) => ok(await removeWebhook(sql, byPerson(person), params.username)), { person: true })
    .put(
      '/agents/:username/a2a-card',
      async ({ params, body, person }) => ok(await setCardListed(sql, byPerson(person), params.username, bodyField(body, 'listed'))),
      { person: true },
    )
    .post(
      '/agents/:username/webhook/enable',
      async ({ params, body, person, request }) => {
        const enabled = await enableWebhook(sql, byPerson(person), params.username, {
          resendFailed: bodyField(body, 'resendFailed') === true,
          withoutPassingTest: bodyField(body, 'withoutPassingTest') === true,
        });
        metrics.endpointTransition('enabled');
        requestLog(log, request).info('webhook_endpoint_enabled', {
          agent: params.username, person: person.username, resent: enabled.resent, passingTest: enabled.passingTest,
        });
        return ok(enabled);
      },
      { person: true },
    )
    .post(
      '/agents/:username/webhook/pause',
      async ({ params, body, person, request }) => {
        const paused = await pauseWebhook(sql, byPerson(person), params.username, bodyField(body, 'reason'));
        metrics.endpointTransition('paused');
        requestLog(log, request).info('webhook_endpoint_paused', { agent: params.username, person: person.username });
        return ok(paused);
      },
      { person: true },
    )
    .post(
      '/agents/:username/webhook/resume',
      async ({ params, body, person, request }) => {
        const resumed = await resumeWebhook(sql, byPerson(person), params.username, { resendFailed: bodyField(body, 'resendFailed') === true });
        metrics.endpointTransition('resumed');
        requestLog(log, request).info('webhook_endpoint_resumed', { agent: params.username, person: person.username, resent: resumed.resent });
        return ok(resumed);
      },
      { person: true },
    )
    .post(
      '/agents/:username/webhook/test-events',
      async ({ params, person, set }) => {
        const event = await sendTestEvent(sql, params.username, person.username, config.WEBHOOK_TIMEOUT_MS);
        set.status = 202;
        return ok(event);
      },
      { person: true },
    )
    .get('/agents/:username/webhook/series', async ({ params, query }) => ok(await endpointSeries(sql, params.username, seriesHours(query.hours))), {
      person: true,
    })
    .get('/agents/:username/governance', async ({ params }) => ok(await agentGovernance(sql, params.username, config)), { person: true })
    .put('/agents/:username/quotas', async ({ params, body, person }) => ok(await setSendQuotas(sql, byPerson(person), params.username, body)), {
      person: true,
    })
    .put(
      '/agents/:username/holds',
      async ({ params, body, person }) => ok(await setAgentHolds(sql, byPerson(person), params.username, bodyField(body, 'holds'))),
      { person: true },
    )
    .get('/agents/:username/keys', async ({ params }) => ok(await keysOf(sql, params.username)), { person: true })
    .post(
      '/agents/:username/keys',
      async ({ body, params, person, set }) => {
        const created = await createKey(sql, byPerson(person), params.username, body);
        set.status = 201;
        return ok(created);
      },
      { person: true },
    )
    .delete(
      '/agents/:username/keys/:keyId',
      async ({ params, person }) => {
        const revoked = await revokeKey(sql, byPerson(person), params.username, params.keyId);
        agentCache.forget({ username: params.username });
        return ok(revoked);
      },
      { person: true },
    )
    .get('/agents/:username/contacts', async ({ params }) => ok(await contactPolicy(sql, params.username)), { person: true })
    .put(
      '/agents/:username/contact-policy',
      async ({ params, body, person }) => ok(await setContactPolicy(sql, byPerson(person), params.username, bodyField(body, 'policy'))),
      { person: true },
    )
    .put(
      '/agents/:username/contacts/:contact',
      async ({ params, body, person }) => ok(await setContact(sql, byPerson(person), params.username, params.contact, bodyField(body, 'list'))),
      { person: true },
    )
    .delete(
      '/agents/:username/contacts/:contact',
      async ({ params, person }) => ok(await removeContact(sql, byPerson(person), params.username, params.contact)),
      { person: true },
    )
    .post(
      '/agents/:username/webhook/rotate-secret',
      async ({ params, body, person }) =>
        ok(await rotateSigningSecret(sql, byPerson(person), params.username, bodyField(body, 'grace'), config.WEBHOOK_SECRET_GRACE_MS)),
      { person: true },
    )
    .get('/agents/:username/webhook/secret', async ({ params, person }) => ok(await revealSigningSecret(sql, byPerson(person), params.username)), {
      person: true,
    })
    .get(
      '/threads',
      async ({ person, query, request }) => {
        const filter = threadFilter(query);
        const page = timeKeyedPageQuery(query);
        return ok(await searchingIf(searches, filter.search, person.id, request.signal, (db) => listThreadsPage(db, filter, page)));
      },
      { person: true },
    )
    .get('/threads/:threadId', async ({ params }) => ok(await threadForPeople(sql, params.threadId, config)), { person: true })
    // Served as the agent API serves it (web/file-response.ts): saved, never run, in a sandbox of
    // its own; the thread page previews images from here.
    .get('/files/:fileId/content', async ({ params, request }) => fileResponse(sql, await fileForPeople(sql, params.fileId), request), { person: true })
    .put(
      '/threads/:threadId/holds',
      async ({ params, body, person }) => ok(await setThreadHolds(sql, byPerson(person), params.threadId, bodyField(body, 'holds'))),
      { person: true },
    )
    .post('/threads/:threadId/resume', async ({ params, person }) => ok(await resumeThread(sql, byPerson(person), params.threadId)), { person: true })
    .get(
      '/threads/:threadId/messages',
      async ({ params, query }) => ok(await threadMessages(sql, params.threadId, pageQuery(query), config.STALLED_AFTER_MS)),
      { person: true },
    )
    .post(
      '/threads/:threadId/participants',
      async ({ person, params, body }) => ok(await addParticipant(sql, personActor(person), params.threadId, body)),
      { person: true },
    )
    .delete(
      '/threads/:threadId/participants/:username',
      async ({ person, params }) => ok(await removeParticipant(sql, byPerson(person), params.threadId, params.username)),
      { person: true },
    )
    .post('/threads/:threadId/confirm-close', async ({ params, person }) => ok(await confirmClose(sql, byPerson(person), params.threadId)), { person: true })
    .post('/threads/:threadId/decline-close', async ({ params, person }) => ok(await declineClose(sql, byPerson(person), params.threadId)), { person: true })
    .post(
      '/threads/:threadId/messages',
      async ({ person, params, body, set, request }) => {
        const posted = await postMessage(sql, requestLog(log, request), personActor(person), params.threadId, body);
        set.status = 201;
        return ok(posted);
      },
      { person: true },
    )
    .get(
      '/deliveries',
      async ({ person, query, request }) => {
        const filter = deliveryFilter(query);
        const page = pageQuery(query);
        return ok(await searchingIf(searches, filter.search, person.id, request.signal, (db) => listDeliveries(db, filter, page, config.STALLED_AFTER_MS)));
      },
      { person: true },
    )
    .get(
      '/deliveries/failed-in-view',
      async ({ person, query, request }) => {
        const filter = deliveryFilter(query);
        return ok(await searchingIf(searches, filter.search, person.id, request.signal, (db) => failedInView(db, filter, config.STALLED_AFTER_MS)));
      },
      { person: true },
    )
    .post(
      '/deliveries/resend-failed',
      async ({ body, person }) => {
        const filter = (body && typeof body === 'object' ? body : {}) as Record<string, unknown>;
        return ok(await resendFailed(sql, byPerson(person), deliveryFilter(filter), filter.upTo, config.STALLED_AFTER_MS));
      },
      { person: true },
    )
    .get(
      '/audit',
      async ({ query }) => ok(await listDecisions(sql, auditFilter(query), pageQuery({ after: query.after, limit: query.limit }))),
      { person: true },
    )
    // Operator webhooks (the Notifications page): `dashboardLinks` says whether notices link to the
    // dashboard (PUBLIC_URL is set).
    .get('/operator-webhooks', async () => ok({ webhooks: await listOperatorWebhooks(sql), dashboardLinks: config.PUBLIC_URL !== undefined }), {
      person: true,
    })
    .post(
      '/operator-webhooks',
      async ({ body, person, set }) => {
        const added = await addOperatorWebhook(sql, person, { url: bodyField(body, 'url'), format: bodyField(body, 'format') }, policy);
        set.status = 201;
        return ok(added);
      },
      { person: true },
    )
    .delete('/operator-webhooks/:id', async ({ params, person }) => ok(await removeOperatorWebhook(sql, byPerson(person), params.id)), { person: true })
    .post(
      '/operator-webhooks/:id/test',
      async ({ params, person, set }) => {
        const queued = await sendTestNotice(sql, person.username, params.id);
        set.status = 202;
        return ok(queued);
      },
      { person: true },
    )
    .get(STREAM_PATH, ({ request }) => deliveryEvents(feed, streams, sessionToken(request)!, request, { log }), { person: true })
    .post('/deliveries/:deliveryId/resend', async ({ params, person }) => ok(await resendDelivery(sql, byPerson(person), params.deliveryId)), {
      person: true,
    });
};
