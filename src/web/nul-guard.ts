import { Elysia } from 'elysia';
import { BEFORE_ROUTING, countEarlyAnswer } from './metrics';
import { refusalFor } from './envelope';

// PostgreSQL cannot store or compare the NUL character in text: a path or query value holding one
// (%00) is refused before any route passes it on to a query. Bodies are checked by the domain's
// validate().
export const nulGuard = () =>
  new Elysia({ name: 'nul-guard' }).onRequest(({ request, set }) => {
    const url = request.url;
    if (url.includes('%00') || url.includes('\u0000')) {
      set.status = 400;
      countEarlyAnswer(request, BEFORE_ROUTING, 400);
      return refusalFor(request, { sentence: 'The request URL must not contain the NUL character (%00).', code: 'invalid' });
    }
  });
