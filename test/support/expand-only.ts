// The rule for migrations after a release (docs/guides/upgrade.md): a
// migration may only add what the previous release does not use, because that release keeps
// running on the new schema until the upgrade is over. A statement that drops, renames, narrows
// or replaces what exists, or adds a rule old writes may break, needs a `-- contract:` comment
// right before it saying why the previous release is unaffected.

export type Finding = { statement: string; why: string };

const RULES: { pattern: RegExp; why: string }[] = [
  { pattern: /\bdrop\b/i, why: 'drops something' },
  { pattern: /\brename\b/i, why: 'renames something' },
  { pattern: /\btruncate\b/i, why: 'empties a table' },
  { pattern: /\bdelete\s+from\b/i, why: 'deletes rows' },
  { pattern: /\balter\s+(column\s+)?\S+\s+(set\s+data\s+)?type\b/i, why: 'changes a column type' },
  { pattern: /\bset\s+not\s+null\b/i, why: 'makes a column required' },
  { pattern: /\badd\s+(constraint|primary\s+key|unique|check|foreign\s+key)\b/i, why: 'adds a constraint old writes may break' },
  { pattern: /\bcreate\s+(constraint\s+)?trigger\b/i, why: 'adds a trigger old writes run into' },
  { pattern: /\bcreate\s+or\s+replace\s+(view|trigger)\b/i, why: 'replaces what the previous release reads or runs' },
  { pattern: /\bcreate\s+unique\s+index\b/i, why: 'adds a uniqueness old writes may break' },
  { pattern: /\badd\s+(column\s+)?(if\s+not\s+exists\s+)?[\w"]+\s+[^,;]*\bnot\s+null\b(?![^,;]*\bdefault\b)/i, why: 'adds a required column without a default' },
];

// Statements of a migration, each with the comments before it, split at semicolons outside quotes,
// dollar-quoted bodies and comments.
export function statements(sql: string): { leading: string; body: string }[] {
  const found: { leading: string; body: string }[] = [];
  let leading = '';
  let body = '';
  let i = 0;
  // A comment after a statement's semicolon on the same line belongs to that statement, not the next.
  let trailing = false;
  const flush = () => {
    if (body.trim()) found.push({ leading, body: body.trim() });
    leading = '';
    body = '';
  };
  while (i < sql.length) {
    const rest = sql.slice(i);
    const dollar = /^\$[A-Za-z_][A-Za-z0-9_]*\$|^\$\$/.exec(rest);
    if (rest[0] === '\n') trailing = false;
    if (rest.startsWith('--')) {
      const end = sql.indexOf('\n', i);
      const line = sql.slice(i, end < 0 ? sql.length : end + 1);
      if (body.trim()) body += ' ';
      else if (!trailing) leading += line;
      trailing = false;
      i += line.length;
    } else if (rest.startsWith('/*')) {
      const end = sql.indexOf('*/', i + 2);
      body += ' ';
      i = end < 0 ? sql.length : end + 2;
    } else if (rest.startsWith("'")) {
      const end = sql.indexOf("'", i + 1);
      const stop = end < 0 ? sql.length : end + 1;
      body += sql.slice(i, stop);
      i = stop;
    } else if (dollar) {
      // A function's body is kept out of the text the rules read (plpgsql may well delete rows when
      // called); a DO block's runs now, so its text is read like any other.
      const end = sql.indexOf(dollar[0], i + dollar[0].length);
      const stop = end < 0 ? sql.length : end + dollar[0].length;
      body += /\bcreate\s+(or\s+replace\s+)?(function|procedure)\b/i.test(body) ? ' $body$ ' : ` ${sql.slice(i + dollar[0].length, end < 0 ? sql.length : end)} `;
      i = stop;
    } else if (rest[0] === ';') {
      flush();
      trailing = true;
      i += 1;
    } else {
      body += rest[0];
      i += 1;
    }
  }
  flush();
  return found;
}

// `earlier`: the text of every migration before this one, to tell a new function from a
// replaced one.
export function contractions(sql: string, earlier: string): Finding[] {
  const findings: Finding[] = [];
  for (const { leading, body } of statements(sql)) {
    if (/^\s*--\s*contract:\s*\S/m.test(leading)) continue;
    const text = body.replace(/\s+/g, ' ');
    for (const rule of RULES) if (rule.pattern.test(text)) findings.push({ statement: text, why: rule.why });
    const replaced = /\bcreate\s+or\s+replace\s+(?:function|procedure)\s+(?:[\w"]+\.)?([\w"]+)\s*\(/i.exec(text)?.[1]?.replaceAll('"', '');
    if (replaced && new RegExp(`\\b(function|procedure)\\s+([\\w"]+\\.)?"?${replaced}"?\\s*\\(`, 'i').test(earlier)) {
      findings.push({ statement: text, why: 'replaces a function the previous release runs' });
    }
  }
  return findings;
}
