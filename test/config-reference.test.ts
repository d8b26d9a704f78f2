import { expect, test } from 'bun:test';
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { ConfigSchema } from '../src/config';
import { configurationTable, GENERATED_BELOW } from './support/config-reference';

// docs/reference/configuration.md shows one table of every variable, written from the schema that
// reads them (src/config.ts): `bun run docs:config` writes it again after a change to the schema.
const PAGE = resolve(import.meta.dir, '../docs/reference/configuration.md');

test('the configuration reference is the table the schema makes', () => {
  const page = readFileSync(PAGE, 'utf8');
  const at = page.indexOf(GENERATED_BELOW);
  expect(at).toBeGreaterThan(0);
  const written = `${page.slice(0, at)}${configurationTable()}`;
  if (process.env.UPDATE_CONFIG_REFERENCE === '1') writeFileSync(PAGE, written);
  else expect(page).toBe(written);
});

test('every variable has a group and a meaning to show', () => {
  const undocumented = Object.entries(ConfigSchema.properties)
    .filter(([, schema]) => typeof (schema as { meaning?: unknown }).meaning !== 'string' || typeof (schema as { group?: unknown }).group !== 'string')
    .map(([name]) => name);
  expect(undocumented).toEqual([]);
});
