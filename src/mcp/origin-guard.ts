import type { Config } from '../config';

const LOOPBACK_HOSTNAMES = new Set(['localhost', '127.0.0.1', '[::1]']);

const parsed = (url: string) => {
  try {
    return new URL(url);
  } catch {
    return null;
  }
};
const hostnameOf = (url: string) => parsed(url)?.hostname ?? null;

const isLoopbackOrigin = (origin: string) => /^https?:\/\//.test(origin) && LOOPBACK_HOSTNAMES.has(hostnameOf(origin) ?? '');

// DNS-rebinding protection, as the MCP specification requires of a Streamable HTTP server: a page
// on a foreign site whose name has been pointed at this server sends its own Origin (and, when the
// server listens on loopback only, its own Host). Programs send no Origin at all and pass; pages
// are let in only from PUBLIC_URL's origin, loopback origins, and MCP_ALLOWED_ORIGINS. Answers the
// refusal's sentence, or null.
export function mcpOriginGuard(config: Pick<Config, 'HOST' | 'PUBLIC_URL' | 'MCP_ALLOWED_ORIGINS'>) {
  const allowed = new Set(
    [config.PUBLIC_URL ?? '', ...config.MCP_ALLOWED_ORIGINS.split(',')]
      .map((origin) => origin.trim())
      .map((origin) => parsed(origin)?.origin)
      .filter((origin) => origin !== undefined),
  );
  const loopbackOnly = LOOPBACK_HOSTNAMES.has(config.HOST) || config.HOST === '::1';
  return (request: Request): string | null => {
    const origin = request.headers.get('origin');
    if (origin !== null && !allowed.has(origin) && !isLoopbackOrigin(origin)) {
      return `This MCP server does not take requests from pages at ${origin} (DNS-rebinding protection); an operator can allow an origin with MCP_ALLOWED_ORIGINS.`;
    }
    const host = request.headers.get('host');
    if (loopbackOnly && host !== null && !LOOPBACK_HOSTNAMES.has(hostnameOf(`http://${host}`) ?? '')) {
      return `This MCP server listens on loopback only and does not answer for the host ${host} (DNS-rebinding protection).`;
    }
    return null;
  };
}
