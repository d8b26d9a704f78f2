import {
  CSRF_HEADER,
  CSRF_VALUE,
  DASHBOARD_API,
  DASHBOARD_PATH,
  SESSION_ENDED,
  type DashboardRefusal,
  type RefusalCode,
} from '../../../web/dashboard-protocol.ts';
import { sessionEnded } from './session.ts';

// A call that did not succeed: the sentence a person can act on, and, when the service refused it,
// the code (and the input field) the page decides by. Pages never read the sentence.
export class ApiError extends Error {
  constructor(
    message: string,
    readonly code: RefusalCode | null = null,
    readonly field: string | null = null,
  ) {
    super(message);
  }
}

// Whatever was thrown, as an ApiError.
export const apiError = (error: unknown) => (error instanceof ApiError ? error : new ApiError(error instanceof Error ? error.message : String(error)));

// A proxy in between may answer a refusal without a code.
type Answer<T> = { success: true; data: T } | (Omit<DashboardRefusal, 'code'> & { code?: RefusalCode });

// Every call sends the header the server requires on state changes and unwraps the envelope. Paths
// are under the dashboard API unless given whole (the consent page's routes live under its own
// address).
export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { [CSRF_HEADER]: CSRF_VALUE };
  const init: RequestInit = { method, headers, credentials: 'same-origin' };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res: Response;
  try {
    res = await fetch(path.startsWith(`${DASHBOARD_PATH}/`) ? path : DASHBOARD_API + path, init);
  } catch {
    throw new ApiError('Could not reach the service: check the connection, then try again.');
  }
  const payload = (await res.json().catch(() => null)) as Answer<T> | null;
  if (payload?.success === false && payload.code === 'no_session') {
    sessionEnded(SESSION_ENDED.expired.sentence);
    throw new ApiError(SESSION_ENDED.expired.sentence, payload.code);
  }
  if (!payload || typeof payload.success !== 'boolean') {
    throw new ApiError(`The service answered HTTP ${res.status} without saying why; try again in a moment.`);
  }
  if (!payload.success) throw new ApiError(payload.error, payload.code ?? null, payload.field ?? null);
  return payload.data;
}
