import { sameSecret } from '../domain/agents/keys';
import { fail } from './envelope';

// The operator's routes (GET /metrics, GET /health/details) answer only the bearer of
// METRICS_TOKEN; without one configured they do not exist. Answers the refusal to send, or null.
export function refuseNonOperator(token: string | undefined, request: Request, set: { status?: number | string; headers: Record<string, unknown> }) {
  if (!token) {
    set.status = 404;
    return fail('Operator routes are off: set METRICS_TOKEN to serve /metrics and /health/details.');
  }
  const given = /^Bearer\s+(\S+)$/i.exec(request.headers.get('authorization') ?? '')?.[1];
  if (given && sameSecret(given, token)) return null;
  set.status = 401;
  set.headers['www-authenticate'] = 'Bearer realm="operator"';
  return fail('Send the operator token: "Authorization: Bearer <METRICS_TOKEN>".');
}
