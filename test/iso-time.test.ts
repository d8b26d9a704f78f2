import { expect, test } from 'bun:test';
import { isoFromText } from '../src/domain/shared/iso-time';
import { useHarness } from './support/harness';

const h = useHarness();

// Whatever form PostgreSQL writes a timestamptz in, the text gives the time a Date parsed from it
// gives: to the millisecond, the microseconds cut off.
test('isoFromText reads the time PostgreSQL wrote, in any time zone, as a parsed Date does', async () => {
  const times = [
    '2026-11-29 15:55:14+00',
    '2026-11-29 15:55:14.1+00',
    '2026-11-29 15:55:14.12+00',
    '2026-11-29 15:55:14.123+00',
    '2026-11-29 15:55:14.1234+00',
    '2026-11-29 15:55:14.999999+00',
    '2026-12-31 23:59:59.9999+00',
    '1999-01-01 00:00:00.000001+00',
  ];
  const connection = await h.db.sql.reserve();
  try {
    for (const zone of ['UTC', 'Europe/Paris', 'America/St_Johns']) {
      await connection.unsafe(`set time zone '${zone}'`);
      const rows = await connection<{ text: string; time: Date }[]>`
        select t::timestamptz::text as text, t::timestamptz as time from unnest(${times}::text[]) t`;
      for (const { text, time } of rows) expect([text, isoFromText(text)]).toEqual([text, time.toISOString()]);
    }
  } finally {
    await connection.unsafe('reset time zone');
    connection.release();
  }
  expect(times.map(isoFromText)).toEqual([
    '2026-11-29T15:55:14.000Z',
    '2026-11-29T15:55:14.100Z',
    '2026-11-29T15:55:14.120Z',
    '2026-11-29T15:55:14.123Z',
    '2026-11-29T15:55:14.123Z',
    '2026-11-29T15:55:14.999Z',
    '2026-12-31T23:59:59.999Z',
    '1999-01-01T00:00:00.000Z',
  ]);
});
