import type { DeliveryState } from '../../../domain/shared/state-names.ts';
import type { Progress, Step } from './types.ts';

// What each state a delivery can read as is called on the pages.
export const STATE_LABELS: Record<DeliveryState, string> = {
  failed: 'Failed',
  retrying: 'Retrying',
  stalled: 'Stalled',
  accepted: 'Accepted',
  notified: 'Notified',
  delivered: 'Delivered',
  fetched: 'Fetched',
};

// The steps of a delivery in order, each with the field that holds when it was reached.
export const STEPS = [
  ['accepted', 'createdAt'],
  ['notified', 'notifiedAt'],
  ['delivered', 'deliveredAt'],
  ['fetched', 'fetchedAt'],
] as const;

// The name of a step a delivery reaches (not of Failed, which is no step reached).
export const stepName = (step: Step | null) => (step && step !== 'failed' ? STATE_LABELS[step] : undefined);

export const stateOf = (d: Progress) =>
  STATE_LABELS[d.step === 'failed' ? 'failed' : d.stalled ? 'stalled' : d.retrying ? 'retrying' : d.step];
export const stateClass = (d: Progress) => `badge step-${d.step}${d.stalled ? ' stalled' : ''}${d.retrying ? ' retrying' : ''}`;
