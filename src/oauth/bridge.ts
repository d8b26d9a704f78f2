import { FetchIncomingMessage, toFetchResponse, toReqRes } from 'fetch-to-node';
import type { IncomingMessage, ServerResponse } from 'node:http';

// oidc-provider is a Koa application written for Node's http server; this service answers fetch
// Requests. fetch-to-node turns one into the other. Two things it leaves out are supplied here:
// the socket (Koa reads it for the protocol, so that cookies over https are Secure) and the
// address the client used: every request is seen as made to the issuer (PUBLIC_URL), so that the
// URLs oidc-provider writes into its answers are the public ones, behind any proxy.
// `withBody: false` for a request whose body the route has read already (the consent routes need
// only its cookies).
export function nodeRequest(request: Request, issuer: URL, withBody = true): { req: IncomingMessage; res: ServerResponse } {
  const url = new URL(request.url);
  const headers = new Headers(request.headers);
  headers.set('host', issuer.host);
  const seenAsPublic = new Request(new URL(url.pathname + url.search, issuer.origin).href, {
    method: request.method,
    headers,
    body: withBody ? request.body : null,
  });
  const encrypted = issuer.protocol === 'https:';
  const { req, res } = toReqRes(seenAsPublic, {
    createIncomingMessage: () => {
      const incoming = new FetchIncomingMessage();
      Object.defineProperty(incoming, 'socket', { value: { encrypted, remoteAddress: undefined }, configurable: true });
      return incoming;
    },
  });
  return { req: req as unknown as IncomingMessage, res: res as unknown as ServerResponse };
}

export async function answerNodeStyle(
  handler: (req: IncomingMessage, res: ServerResponse) => unknown,
  request: Request,
  issuer: URL,
): Promise<Response> {
  const { req, res } = nodeRequest(request, issuer);
  handler(req, res);
  return toFetchResponse(res as never);
}
