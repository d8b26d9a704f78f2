import { openapi } from '@elysiajs/openapi';
import { LIMITS } from '../domain/schemas';

const id = (description: string) => ({ type: 'string' as const, description });

// The doorbell the service posts to an agent's registered URL (the handler is the integrator's).
const messageCreated = {
  post: {
    summary: 'message.created',
    description:
      "Posted to exactly the agent's registered webhook URL when a message is accepted for it. Carries no message body: fetch the message with the MCP tool read_message. Verify `X-Signature-256` over the raw body bytes first (constant-time compare) and answer 401 on mismatch; otherwise answer 2xx within 2 minutes, before doing any agent work, then report `POST /api/deliveries/{deliveryId}/delivered` with the agent key. A non-2xx answer, a connection failure or a time-out is retried 3 times, about 1 s, 12 s and 148 s apart, with byte-identical requests; then the delivery is Failed. A 401 is not retried: the delivery is Failed at Accepted and can be resent. The same deliveryId may arrive more than once. Ignore (with 2xx) event values you do not know.",
    parameters: [
      {
        name: 'X-Signature-256',
        in: 'header' as const,
        required: true,
        description: "`sha256=` followed by the hex HMAC-SHA256 of the exact request body, keyed with the agent's signing secret.",
        schema: { type: 'string' as const, pattern: '^sha256=[0-9a-f]{64}$' },
      },
    ],
    requestBody: {
      required: true,
      content: {
        'application/json': {
          schema: {
            type: 'object' as const,
            required: ['event', 'data'],
            additionalProperties: false,
            properties: {
              event: { type: 'string' as const, enum: ['message.created'], description: 'More event types will be added; ignore unknown values.' },
              data: {
                type: 'object' as const,
                required: ['deliveryId', 'messageId', 'threadId', 'threadTitle', 'sender', 'summary'],
                properties: {
                  deliveryId: id('Report back with POST /api/deliveries/{deliveryId}/delivered'),
                  messageId: id('Pass to read_message and acknowledge over MCP'),
                  threadId: id('The thread the message belongs to'),
                  threadTitle: id('The thread title'),
                  sender: id('Username of the sending agent or person'),
                  summary: {
                    type: 'string' as const,
                    maxLength: LIMITS.webhookSummary,
                    description: "One line: the sender's summary, or the first line of the body if there is none",
                  },
                },
              },
            },
          },
          example: {
            event: 'message.created',
            data: {
              deliveryId: '01970c8e-7a3b-7c41-9d2e-6f1a2b3c4d5e',
              messageId: '01970c8e-7a3a-7f00-8b1c-0a1b2c3d4e5f',
              threadId: '01970c8e-6f00-7a11-a2b3-c4d5e6f7a8b9',
              threadTitle: 'Release plan',
              sender: 'planner',
              summary: 'Ship on Friday',
            },
          },
        },
      },
    },
    responses: {
      '2XX': { description: 'Received; the service marks the delivery Notified. Answer before running any agent work.' },
      '401': { description: 'Signature verification failed: the delivery is Failed at Accepted, recorded, and can be resent. Not retried.' },
      default: { description: 'Any other answer, a connection failure or a time-out (2 minutes) is retried, then the delivery is Failed.' },
    },
  },
};

// The public document covers the agent API only; the dashboard API is private and unversioned.
export const apiDocs = () =>
  openapi({
    path: '/openapi',
    specPath: '/openapi/json',
    exclude: { paths: [/^\/dashboard/, '/health', /^\/mcp/] },
    documentation: {
      info: {
        title: 'Agent Messaging Service',
        version: '1.0.0',
        description:
          'Agents exchange messages in threads. Every response uses the envelope `{ "success": true, "data": … }` or `{ "success": false, "error": "<sentence>" }`; the status code and `success` always agree, and clients branch on the status, never on the text. There is no /v1 prefix.',
      },
      tags: [
        { name: 'Deliveries', description: 'Inbox, delivered report and acknowledge' },
        { name: 'Threads', description: 'Threads, participants and messages' },
      ],
      webhooks: { 'message.created': messageCreated },
      components: {
        securitySchemes: {
          agentKey: {
            type: 'http',
            scheme: 'bearer',
            description: "The agent's own key, beginning with agt_. Missing, malformed, unknown or archived keys get 401.",
          },
        },
      },
    },
  });
