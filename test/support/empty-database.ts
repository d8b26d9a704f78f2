import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { connect } from '../../src/db/connect';
import { type TestDatabase, withConnectionSlot } from './database';

// A database with nothing in it (made from template0, not from the migrated template) on the
// server that `onServerOf`, a database URL, points at; drop() drops it.
export async function emptyDatabase(onServerOf: string): Promise<TestDatabase> {
  const server = new URL(onServerOf);
  server.pathname = '/postgres';
  const name = `ams_test_empty_${randomBytes(6).toString('hex')}`;
  const admin = postgres(server.toString(), { max: 1, onnotice: () => {} });
  try {
    await withConnectionSlot(() => admin.unsafe(`create database ${name} template template0`));
  } catch (error) {
    await admin.end({ timeout: 0 });
    throw error;
  }
  const url = new URL(server);
  url.pathname = `/${name}`;
  const sql = connect(url.toString(), 1);
  return {
    sql,
    url: url.toString(),
    drop: async () => {
      await sql.end({ timeout: 1 });
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    },
  };
}
