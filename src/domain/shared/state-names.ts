// The states a person filters deliveries and threads by. A leaf module (it imports nothing), so that
// the dashboard's browser code offers the same states the server accepts; what each delivery state
// means is delivery-states.ts.
export const DELIVERY_STATES = ['failed', 'retrying', 'stalled', 'accepted', 'notified', 'delivered', 'fetched'] as const;
export type DeliveryState = (typeof DELIVERY_STATES)[number];

export const THREAD_STATES = ['open', 'close-pending', 'closed'] as const;
export type ThreadState = (typeof THREAD_STATES)[number];
