import { Elysia, ValidationError } from 'elysia';
import { describeValueError } from '../domain/shared/validate';
import type { Logger } from '../log';
import { refusalFor } from './envelope';
import { failureOf } from './failure';
import { requestIdOf, requestLog } from './request-id';

function validationSentence(error: ValidationError): string {
  const first = error.all[0];
  if (first && 'path' in first && first.schema) {
    const root = error.type === 'query' ? 'query' : error.type === 'params' ? 'path' : 'body';
    return describeValueError(first as Parameters<typeof describeValueError>[0], root);
  }
  return 'The request is invalid.';
}

// Every failure leaves in the envelope with a status that agrees with it. Unexpected faults are
// logged with their stack here and answered with a plain sentence, never the stack.
export const errorHandling = (log: Logger) =>
  new Elysia({ name: 'error-handling' }).onError({ as: 'global' }, ({ code, error, set, request, path }) => {
    // Elysia wraps whatever a parse hook throws (authentication included) in a ParseError; only a
    // body that would not parse is the client's fault.
    const cause = code === 'PARSE' && error.cause !== undefined ? error.cause : error;
    const failure = failureOf(cause, requestIdOf(request));
    if (failure.log !== 'fault') {
      if (failure.log) requestLog(log, request).warn(failure.log, { method: request.method, path, error: (cause as Error).message });
      set.status = failure.status;
      if (failure.retryAfter !== false) set.headers['retry-after'] = String(failure.retryAfter === true ? 1 : failure.retryAfter);
      return refusalFor(request, failure);
    }
    switch (code) {
      case 'VALIDATION':
        if (error.type === 'response') break;
        set.status = 400;
        return refusalFor(request, { sentence: validationSentence(error as ValidationError), code: 'invalid' });
      case 'PARSE':
        if (cause !== error && !(cause instanceof SyntaxError)) break;
        set.status = 400;
        return refusalFor(request, { sentence: 'The request body is not valid JSON.', code: 'invalid' });
      case 'NOT_FOUND':
        set.status = 404;
        return refusalFor(request, { sentence: `No route for ${request.method} ${path}.`, code: 'no_route' });
    }
    requestLog(log, request).error('request_failed', {
      method: request.method,
      path,
      code,
      error: cause instanceof Error ? (cause.stack ?? cause.message) : String(cause),
    });
    set.status = failure.status;
    return refusalFor(request, failure);
  });
