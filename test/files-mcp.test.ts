import { expect, test } from 'bun:test';
import { randomBytes } from 'node:crypto';
import { uniqueName, useHarness, useListening, type TestAgent } from './support/harness';
import { mcpClient } from './support/mcp-client';
import { mcpClient2026 } from './support/mcp-client-2026';

// Files over MCP, through the official SDK client over real HTTP: attached by send_message, linked
// by read_message, served by resources/read (text inline, small files as a blob, large ones named
// with their HTTP address), and not found by a stranger; the same over both protocol versions.
const h = useHarness({ FILE_MAX_BYTES: '400000' });
const server = useListening(h);

async function upload(agent: TestAgent, bytes: Uint8Array, name: string, type: string) {
  const response = await fetch(`${server.base}/api/files?name=${name}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${agent.key}`, 'content-type': type },
    body: bytes,
  });
  expect(response.status).toBe(201);
  return ((await response.json()) as any).data;
}

test('send_message attaches files; read_message links them and resources/read serves each; a stranger finds none', async () => {
  const [sender, reader, stranger] = [await h.agent(uniqueName('sender')), await h.agent(uniqueName('reader')), await h.agent(uniqueName('stranger'))];
  const threadId = await h.thread(sender, [reader]);
  const png = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), randomBytes(100)]);
  const large = randomBytes(300_000);
  const files = [
    await upload(sender, Buffer.from('name,score\nada,3\n'), 'scores.csv', 'text/csv'),
    await upload(sender, png, 'dot.png', 'image/png'),
    await upload(sender, large, 'large.bin', 'application/octet-stream'),
  ];

  const sending = await mcpClient(server.base, sender.key);
  const sent = await sending.call('send_message', { threadId, content: 'Three files', files: files.map((f) => f.id) });
  expect(sent.data.recipients).toBe(1);
  await sending.close();

  const reading = await mcpClient(server.base, reader.key);
  const read = (await reading.client.callTool({ name: 'read_message', arguments: { messageId: sent.data.id } })) as any;
  expect(read.structuredContent.files).toEqual(files);
  expect(read.content.slice(1)).toEqual(
    files.map((f) => ({ type: 'resource_link', uri: `ams://files/${f.id}`, name: f.name, mimeType: f.contentType, size: f.size, description: `${f.size} bytes, SHA-256 ${f.sha256}` })),
  );
  const [csv, dot, bin] = await Promise.all(files.map((f) => reading.client.readResource({ uri: `ams://files/${f.id}` })));
  const meta = (f: any) => ({ name: f.name, size: f.size, sha256: f.sha256 });
  expect(csv!.contents).toEqual([{ uri: `ams://files/${files[0].id}`, mimeType: 'text/csv', text: 'name,score\nada,3\n', _meta: meta(files[0]) }]);
  expect(dot!.contents).toEqual([{ uri: `ams://files/${files[1].id}`, mimeType: 'image/png', blob: png.toString('base64'), _meta: meta(files[1]) }]);
  const download = `${server.base}/api/files/${files[2].id}/content`;
  expect(bin!.contents).toEqual([
    {
      uri: `ams://files/${files[2].id}`,
      mimeType: 'text/plain',
      text: `large.bin (application/octet-stream, 300000 bytes, SHA-256 ${files[2].sha256}) is too large to hand over here: download it from ${download} with your agent key as a Bearer token.`,
      _meta: { ...meta(files[2]), contentType: 'application/octet-stream', download },
    },
  ]);
  const fetched = await fetch(download, { headers: { authorization: `Bearer ${reader.key}` } });
  expect(Buffer.from(await fetched.arrayBuffer()).equals(large)).toBe(true);
  const { resourceTemplates } = await reading.client.listResourceTemplates();
  expect(resourceTemplates.map((t) => t.uriTemplate)).toEqual(['ams://files/{fileId}']);
  await reading.close();

  const nosy = await mcpClient(server.base, stranger.key);
  await expect(nosy.client.readResource({ uri: `ams://files/${files[0].id}` })).rejects.toThrow(
    'No such file, or you cannot see it: a file is seen by its uploader until a message carries it, then by the participants of the threads its messages are in.',
  );
  const own = await h.thread(stranger, [reader]);
  const refused = await nosy.call('send_message', { threadId: own, content: 'Look what I found', files: [files[0].id] });
  expect(refused.error).toBe(
    `No such file, or you cannot see it: a file is seen by its uploader until a message carries it, then by the participants of the threads its messages are in. (${files[0].id})`,
  );
  await nosy.close();
});

test('over MCP 2026-07-28 the same: send_message attaches, read_message links, resources/read serves, the templates are listed', async () => {
  const [sender, reader] = [await h.agent(uniqueName('sender')), await h.agent(uniqueName('reader'))];
  const threadId = await h.thread(sender, [reader]);
  const file = await upload(sender, Buffer.from('first line\n'), 'notes.txt', 'text/plain');

  const sending = await mcpClient2026(server.base, sender.key);
  const sent = await sending.call('send_message', { threadId, content: 'A note', files: [file.id] });
  expect(sent.data.recipients).toBe(1);
  await sending.close();

  const reading = await mcpClient2026(server.base, reader.key);
  const read = (await reading.client.callTool({ name: 'read_message', arguments: { messageId: sent.data.id } })) as any;
  expect(read.structuredContent.files).toEqual([file]);
  expect(read.content.slice(1)).toEqual([
    { type: 'resource_link', uri: `ams://files/${file.id}`, name: 'notes.txt', mimeType: 'text/plain', size: 11, description: `11 bytes, SHA-256 ${file.sha256}` },
  ]);
  const served = await reading.client.readResource({ uri: `ams://files/${file.id}` });
  expect(served.contents).toEqual([{ uri: `ams://files/${file.id}`, mimeType: 'text/plain', text: 'first line\n', _meta: { name: 'notes.txt', size: 11, sha256: file.sha256 } }]);
  const { resourceTemplates } = await reading.client.listResourceTemplates();
  expect(resourceTemplates.map((t) => t.uriTemplate)).toEqual(['ams://files/{fileId}']);
  await reading.close();
});
