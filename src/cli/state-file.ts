import { readFile, rename, writeFile } from 'node:fs/promises';

// One id kept in a file between runs of a CLI client (`ams wait`'s last delivery, `ams listen`'s
// last event), so that the next run carries on after it. No file, or an empty one: none yet.
export async function readStateFile(path: string): Promise<string | undefined> {
  const text = await readFile(path, 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return '';
    throw error;
  });
  return text.trim() || undefined;
}

export async function writeStateFile(path: string, id: string) {
  // Whole or not at all: a run killed mid-write must not leave half an id behind.
  await writeFile(`${path}.tmp`, id === '' ? '' : `${id}\n`);
  await rename(`${path}.tmp`, path);
}
