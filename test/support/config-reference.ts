import type { TSchema } from '@sinclair/typebox';
import { ConfigSchema, expected, GROUPS } from '../../src/config';

// The configuration reference's table, from the schema the service reads its configuration with:
// one row per variable, under its group, with its default, what it may be and what it means.
export const GENERATED_BELOW = '<!-- Generated from src/config.ts by `bun run docs:config`: edit the schema, not this table. -->';

const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');

function defaultOf(schema: TSchema): string {
  if (schema.default === undefined) return 'unset';
  if (schema.default === '') return 'empty';
  return `\`${String(schema.default)}\``;
}

export function configurationTable(): string {
  const entries = Object.entries(ConfigSchema.properties) as [string, TSchema][];
  const sections = GROUPS.map((group) => {
    const rows = entries
      .filter(([, schema]) => schema.group === group)
      .map(([name, schema]) => `| <a id="${name.toLowerCase()}"></a>\`${name}\` | ${defaultOf(schema)} | ${cell(expected(schema))} | ${cell(schema.meaning)} |`);
    return [`### ${group}`, '', '| Variable | Default | Values | Meaning |', '|---|---|---|---|', ...rows].join('\n');
  });
  const ungrouped = entries.filter(([, schema]) => !(GROUPS as readonly string[]).includes(schema.group)).map(([name]) => name);
  if (ungrouped.length > 0) throw new Error(`Variables without a documented group and meaning in src/config.ts: ${ungrouped.join(', ')}`);
  return `${GENERATED_BELOW}\n\n${sections.join('\n\n')}\n`;
}
