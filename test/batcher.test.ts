import { describe, expect, test } from 'bun:test';
import { batcher, Overloaded } from '../src/db/batcher';

// A stand-in statement that records the batches it was given and answers when told to.
function statement() {
  const batches: number[][] = [];
  const pending: (() => void)[] = [];
  const run = (items: number[]) =>
    new Promise<number[]>((resolve, reject) => {
      batches.push(items);
      pending.push(() => (items.includes(13) ? reject(new Error(`unlucky ${items}`)) : resolve(items.map((i) => i * 10))));
    });
  const answerAll = async () => {
    while (pending.length > 0) {
      pending.shift()!();
      await Bun.sleep(0);
    }
  };
  return { batches, run, answerAll };
}

const shared = (error: unknown) => (error as Error).message === 'database away';

describe('batcher', () => {
  test('sends at once while the database is not busy', async () => {
    const s = statement();
    const send = batcher(s.run, { maxInFlight: 2, maxBatch: 10, sharedFailure: shared });
    const a = send(1);
    const b = send(2);
    expect(s.batches).toEqual([[1], [2]]);
    await s.answerAll();
    expect(await Promise.all([a, b])).toEqual([10, 20]);
  });

  test('gathering, what arrives in the same turn of the event loop shares the first statement', async () => {
    const s = statement();
    const send = batcher(s.run, { maxInFlight: 1, maxBatch: 10, sharedFailure: shared, gather: true });
    const answers = [1, 2, 3].map((i) => send(i));
    expect(s.batches).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(s.batches).toEqual([[1, 2, 3]]);
    const later = send(4);
    await new Promise((resolve) => setImmediate(resolve));
    expect(s.batches).toEqual([[1, 2, 3]]);
    await s.answerAll();
    expect(s.batches).toEqual([[1, 2, 3], [4]]);
    expect(await Promise.all([...answers, later])).toEqual([10, 20, 30, 40]);
  });

  test('what arrives while every slot is busy goes out together, at most maxBatch at a time, each with its own answer', async () => {
    const s = statement();
    const send = batcher(s.run, { maxInFlight: 1, maxBatch: 3, sharedFailure: shared });
    const answers = [1, 2, 3, 4, 5, 6].map((i) => send(i));
    expect(s.batches).toEqual([[1]]);
    await s.answerAll();
    expect(s.batches).toEqual([[1], [2, 3, 4], [5, 6]]);
    expect(await Promise.all(answers)).toEqual([10, 20, 30, 40, 50, 60]);
  });

  test('a failing batch is run again one item at a time: only the bad item fails', async () => {
    const s = statement();
    const send = batcher(s.run, { maxInFlight: 1, maxBatch: 10, sharedFailure: shared });
    const answers = [1, 12, 13, 14].map((i) => send(i).catch((error: Error) => error.message));
    await s.answerAll();
    expect(s.batches).toEqual([[1], [12, 13, 14], [12], [13], [14]]);
    expect(await Promise.all(answers)).toEqual([10, 120, 'unlucky 13', 140]);
  });

  test('a failure every item would share (the database is away) fails the batch at once', async () => {
    const batches: number[][] = [];
    const send = batcher(
      async (items: number[]) => {
        batches.push(items);
        await Bun.sleep(1);
        throw new Error('database away');
      },
      { maxInFlight: 1, maxBatch: 10, sharedFailure: shared },
    );
    const answers = await Promise.all([1, 2, 3].map((i) => send(i).catch((error: Error) => error.message)));
    expect(answers).toEqual(['database away', 'database away', 'database away']);
    expect(batches).toEqual([[1], [2, 3]]);
  });

  test('beyond maxQueued an item is refused at once, and a place frees as the queue drains', async () => {
    const db = statement();
    const send = batcher(db.run, { maxInFlight: 1, maxBatch: 2, maxQueued: 3, sharedFailure: () => false });
    const sent = [1, 2, 3, 4].map((i) => send(i));
    const refused = await send(5).catch((error) => error);
    expect(refused).toBeInstanceOf(Overloaded);
    expect(db.batches).toEqual([[1]]);
    await db.answerAll();
    expect(await Promise.all(sent)).toEqual([10, 20, 30, 40]);
    const later = send(6);
    await db.answerAll();
    expect(await later).toBe(60);
  });
});
