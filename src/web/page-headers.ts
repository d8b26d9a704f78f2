// What every HTML page and asset of ours is served with: scripts and styles from this server only,
// nothing from elsewhere, no framing, no type sniffing, no referrer beyond this origin. A page
// names what it needs beyond that: the hash of an inline script it carries (the dashboard's import
// map), inline styles (the reference viewer injects its own), fonts, or no form at all.
export type PagePolicy = { scriptHashes?: string[]; inlineStyles?: boolean; fonts?: boolean; forms?: boolean };

export function pageHeaders({ scriptHashes = [], inlineStyles = false, fonts = false, forms = true }: PagePolicy = {}) {
  const directives = [
    "default-src 'none'",
    ['script-src', "'self'", ...scriptHashes.map((hash) => `'sha256-${hash}'`)].join(' '),
    `style-src 'self'${inlineStyles ? " 'unsafe-inline'" : ''}`,
    "img-src 'self' data:",
    ...(fonts ? ["font-src 'self' data:"] : []),
    "connect-src 'self'",
    `form-action ${forms ? "'self'" : "'none'"}`,
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ];
  return {
    'content-security-policy': directives.join('; '),
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'same-origin',
  };
}
