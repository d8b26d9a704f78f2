import { A2A_CONTENT_TYPE, StreamResponse } from '@a2a-js/sdk';
import type { PushConfig, PushMessage } from '../domain/deliveries/push-configs';
import type { SentDelivery } from '../domain/deliveries/sent-deliveries';
import { statusUpdate, toTask } from './tasks';

// What an A2A push says (docs/reference/a2a.md): the task's status as A2A's status update, with A2A's token
// header and the configured credentials. The worker sends it (webhooks/push-task.ts); `status` is
// what it compares with the last push delivered to the URL. `origin`: where clients reach this
// service, for the addresses of files.
export function a2aPush(sent: SentDelivery, config: PushConfig, origin: string): PushMessage {
  const task = toTask(sent, 0, origin);
  return {
    status: JSON.stringify(task.status),
    body: JSON.stringify(StreamResponse.toJSON({ payload: { $case: 'statusUpdate', value: statusUpdate(task) } })),
    headers: {
      'Content-Type': A2A_CONTENT_TYPE,
      ...(config.token ? { 'X-A2A-Notification-Token': config.token } : {}),
      ...(config.authScheme ? { Authorization: `${config.authScheme} ${config.authCredentials}` } : {}),
    },
  };
}
