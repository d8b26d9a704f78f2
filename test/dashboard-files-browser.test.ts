import { expect, test } from 'bun:test';
import { deflateSync } from 'node:zlib';
import { axeViolations, pageWidths, useDashboardBrowser } from './support/dashboard-browser';

// A thread's files on the dashboard, in a real headless Chromium: each with its size and type, an
// image previewed, and every one served from the dashboard's download route as an attachment in
// a sandbox, so that an HTML file never runs in the dashboard's origin. Screenshots at desktop and
// phone size go to test-artifacts/dashboard.
const b = useDashboardBrowser({}, { width: 1280, height: 800 });
const { h } = b;

// A 48 x 32 PNG of two colours, made here so that the preview has something to show.
function png(width: number, height: number): Buffer {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (bytes: Buffer) => {
    let c = 0xffffffff;
    for (const byte of bytes) c = crcTable[(c ^ byte) & 0xff]! ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type), data]);
    const out = Buffer.alloc(body.length + 8);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(crc(body), body.length + 4);
    return out;
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8);
  const rows = Buffer.concat(
    Array.from({ length: height }, (_, y) => Buffer.concat([Buffer.from([0]), ...Array.from({ length: width }, (_, x) => Buffer.from(x < width / 2 === y < height / 2 ? [37, 99, 235] : [250, 204, 21]))])),
  );
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', header), chunk('IDAT', deflateSync(rows)), chunk('IEND', Buffer.alloc(0))]);
}

test('a thread shows its files with size and type, previews an image, and serves an HTML file without running it', async () => {
  const { page, base } = b;
  await b.signIn('ada@example.com', 'ada');
  const [designer, reviewer] = [await h.agent('designer'), await h.agent('reviewer')];
  const threadId = await h.thread(designer, [reviewer], 'Landing page review');
  const upload = async (bytes: Buffer, name: string, type: string) => {
    const response = await fetch(`${base}/api/files?name=${encodeURIComponent(name)}`, { method: 'POST', headers: { authorization: `Bearer ${designer.key}`, 'content-type': type }, body: bytes });
    return ((await response.json()) as any).data;
  };
  const image = await upload(png(48, 32), 'hero.png', 'image/png');
  const page1 = await upload(Buffer.from('<script>document.title = "ran"; parent.postMessage("ran", "*")</script><h1>Draft</h1>'), 'draft.html', 'text/html');
  await b.agentCall('POST', `/api/threads/${threadId}/messages`, designer.key, { content: 'The hero image and the draft page.', files: [image.id, page1.id] });

  await page.goto(`${base}/dashboard/threads/${threadId}`);
  const files = page.locator('.attachments');
  await files.getByRole('link', { name: 'draft.html' }).waitFor();
  expect(await files.locator('li').evaluateAll((items) => items.map((li) => li.textContent?.replace(/\s+/g, ' ').trim()))).toEqual([
    `hero.png ${image.size} B · image/png`,
    `draft.html ${page1.size} B · text/html`,
  ]);
  // The image is shown, from the download route; the HTML file is a link only.
  const preview = files.locator('img');
  expect(await preview.count()).toBe(1);
  await page.waitForFunction(() => (globalThis as any).document.querySelector('.attachments img')?.naturalWidth === 48);
  expect(await preview.getAttribute('src')).toBe(`/dashboard/api/files/${image.id}/content`);
  // The download route serves it as an attachment in a sandbox of its own, to the signed-in person only.
  const served = await page.request.get(`${base}/dashboard/api/files/${page1.id}/content`);
  expect([served.status(), served.headers()['content-disposition'], served.headers()['content-security-policy'], served.headers()['x-content-type-options']]).toEqual([
    200,
    `attachment; filename="draft.html"; filename*=UTF-8''draft.html`,
    "default-src 'none'; sandbox",
    'nosniff',
  ]);
  expect((await fetch(`${base}/dashboard/api/files/${page1.id}/content`)).status).toBe(401);
  expect(await page.title()).not.toBe('ran');
  expect(await axeViolations(page)).toEqual([]);
  await b.screenshot('files-desktop');
  await page.setViewportSize({ width: 390, height: 844 });
  const [scrollWidth, clientWidth] = await pageWidths(page);
  expect(scrollWidth).toBe(clientWidth);
  await b.screenshot('files-phone');
});
