import { Elysia } from 'elysia';
import { escapeHtml } from '../web/html';
import { pageHeaders } from '../web/page-headers';
import scalarBundle from '../../node_modules/@scalar/api-reference/dist/browser/standalone.js' with { type: 'file' };

// The reference viewer is pinned (package.json holds the same exact version) and served from this
// service, so the page works offline and changes only with a deploy. The version is in the path,
// so a cached copy is never stale and can be kept for a year.
export const SCALAR_VERSION = '1.72.1';
export const SCALAR_PATH = `/openapi/assets/scalar-${SCALAR_VERSION}.js`;
export const REFERENCE_PATH = '/openapi';

// Scripts only from this server, and no eval. Scalar's bundle injects several <style> elements and
// style attributes of its own, so inline styles are allowed: they cannot run code.
const SECURITY_HEADERS = pageHeaders({ inlineStyles: true, fonts: true, forms: false });

// No fonts, telemetry, AI agent or MCP generator from Scalar's servers: the page must not reach
// anything but this service.
const configuration = (specPath: string) =>
  JSON.stringify({
    url: specPath,
    withDefaultFonts: false,
    telemetry: false,
    hideClientButton: true,
    showDeveloperTools: 'never',
    defaultOpenAllTags: true,
    agent: { disabled: true },
    mcp: { disabled: true },
  });

function renderReferencePage(info: { title: string; description?: string }, specPath: string) {
  const description = escapeHtml(info.description ?? '');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(info.title)}</title>
<meta name="description" content="${description}">
<meta property="og:description" content="${description}">
</head>
<body>
<script id="api-reference" type="application/json" data-configuration="${escapeHtml(configuration(specPath))}"></script>
<script src="${SCALAR_PATH}"></script>
</body>
</html>`;
}

// `/openapi` is our own page: the OpenAPI plugin's page took Scalar from a CDN and did not escape
// the description.
export const referencePage = (info: { title: string; description?: string }, specPath = '/openapi/json') => {
  const page = renderReferencePage(info, specPath);
  return new Elysia({ name: 'reference-page' })
    .get(
      REFERENCE_PATH,
      () => new Response(page, { headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-cache', ...SECURITY_HEADERS } }),
      { detail: { hide: true } },
    )
    .get(
      SCALAR_PATH,
      () =>
        new Response(Bun.file(scalarBundle), {
          headers: {
            'content-type': 'text/javascript; charset=utf-8',
            'cache-control': 'public, max-age=31536000, immutable',
            'x-content-type-options': 'nosniff',
          },
        }),
      { detail: { hide: true } },
    );
};
