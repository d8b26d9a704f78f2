import { expect, test } from 'bun:test';
import { useHarness } from './support/harness';

const h = useHarness();

test('the OpenAPI document describes the message.created doorbell: payload, signature header, answers', async () => {
  const res = await h.call('GET', '/openapi/json');
  expect(res.status).toBe(200);
  const doorbell = res.body.webhooks['message.created'].post;
  expect(doorbell.parameters).toEqual([expect.objectContaining({ name: 'X-Signature-256', in: 'header', required: true })]);
  const schema = doorbell.requestBody.content['application/json'].schema;
  expect(schema.required).toEqual(['event', 'data']);
  expect(Object.keys(schema.properties.data.properties)).toEqual(['deliveryId', 'messageId', 'threadId', 'threadTitle', 'sender', 'summary']);
  expect(schema.properties.data.properties.summary.maxLength).toBe(120);
  expect(Object.keys(doorbell.responses).sort()).toEqual(['2XX', '401', 'default']);
});
