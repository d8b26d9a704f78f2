import { expect, test } from 'bun:test';
import { useHarness } from './support/harness';

const h = useHarness();

test('the OpenAPI document describes the message.created doorbell: payload, every header, answers', async () => {
  const res = await h.call('GET', '/openapi/json');
  expect(res.status).toBe(200);
  const doorbell = res.body.webhooks['message.created'].post;
  const header = (name: string, pattern: string) =>
    expect.objectContaining({ name, in: 'header', required: true, description: expect.any(String), schema: { type: 'string', pattern } });
  expect(doorbell.parameters).toEqual([
    header('X-Signature-256', '^sha256=[0-9a-f]{64}$'),
    header('webhook-id', '^[0-9a-f-]{36}$'),
    header('webhook-timestamp', '^[0-9]+$'),
    header('webhook-signature', '^v1,[A-Za-z0-9+/]{43}=$'),
    header('User-Agent', '^agent-messaging-service-webhooks/1$'),
  ]);
  // Content-Type is not a header parameter in OpenAPI: the request body's media type states it.
  expect(Object.keys(doorbell.requestBody.content)).toEqual(['application/json']);
  expect(doorbell.operationId).toBe('messageCreated');
  expect(doorbell.security).toEqual([]);
  expect(doorbell.requestBody.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/MessageCreatedEvent' });
  const schema = res.body.components.schemas.MessageCreatedEvent;
  expect(schema.required).toEqual(['event', 'data']);
  expect(Object.keys(schema.properties.data.properties)).toEqual(['deliveryId', 'messageId', 'threadId', 'threadTitle', 'sender', 'summary', 'files']);
  expect(schema.properties.data.properties.summary.maxLength).toBe(120);
  expect(Object.keys(doorbell.responses).sort()).toEqual(['2XX', '401', 'default']);
});
