// A webhook handler for an agent, following the six rules of the contract:
//   1. read the raw, unparsed body bytes;
//   2. check the signature over exactly those bytes, in constant time;
//   3. on mismatch answer 401, process nothing and log nothing of the body;
//   4. on match answer 2xx at once, then hand the event on and report it delivered;
//   5. answer 2xx to an event it does not know, and ignore it;
//   6. tolerate the same deliveryId arriving twice.
//
// Every doorbell carries two signatures of the same body; the handler checks one scheme:
//   standard-webhooks (default): webhook-signature over webhook-id, webhook-timestamp and the body,
//     with the timestamp at most five minutes off, so a captured doorbell cannot be replayed later;
//   x-signature-256: the contract's header alone, an HMAC of the body without a timestamp.
//
// Run it:  SIGNING_SECRET=whsec_… AGENT_KEY=agt_… SERVICE_URL=https://ams.example.com bun examples/webhook-handler.ts
// (SCHEME=x-signature-256 for the contract's header), then register its public https:// address as
// the agent's webhook URL. While a rotated secret's grace lasts, SIGNING_SECRET may hold the new
// and the old secret separated by a space: a doorbell signed with either is taken.
import { verifySignature, verifyStandardWebhook } from '../src/webhooks/verify';

export type MessageCreated = {
  deliveryId: string;
  messageId: string;
  threadId: string;
  threadTitle: string;
  sender: string;
  summary: string;
};

export type SignatureScheme = 'standard-webhooks' | 'x-signature-256';

export type HandlerOptions = {
  // One secret, or the new and the old one while a rotation's grace lasts.
  signingSecret: string | readonly string[];
  scheme?: SignatureScheme;
  agentKey: string;
  serviceUrl: string;
  // The agent's work: fetch the message with read_message (MCP) and act on it. Runs after the
  // answer has gone back, so it may take as long as it needs.
  onMessage: (event: MessageCreated) => Promise<void> | void;
  log?: (line: string) => void;
};

export function createWebhookHandler({
  signingSecret,
  scheme = 'standard-webhooks',
  agentKey,
  serviceUrl,
  onMessage,
  log = console.log,
}: HandlerOptions) {
  // Deliveries already handed on. Kept in memory here; a handler with several instances would
  // keep it somewhere shared. A repeat costs little anyway: the inbox lists only unacknowledged mail.
  const seen = new Set<string>();

  // Hands the event to the agent, then reports it delivered at once, not after the agent's work: the
  // service reads the gap between Delivered and Fetched as the agent's pace, and a handler that
  // never reports as a broken handler.
  async function handOn(event: MessageCreated) {
    const work = Promise.resolve()
      .then(() => onMessage(event))
      .catch((error) => log(`agent work on ${event.deliveryId} failed: ${(error as Error).message}`));
    try {
      const res = await fetch(`${serviceUrl}/api/deliveries/${encodeURIComponent(event.deliveryId)}/delivered`, {
        method: 'POST',
        headers: { authorization: `Bearer ${agentKey}` },
      });
      if (!res.ok) log(`delivered report for ${event.deliveryId} answered ${res.status}`);
    } catch (error) {
      log(`delivered report for ${event.deliveryId} failed: ${(error as Error).message}`);
    }
    await work;
  }

  return async function handle(req: Request): Promise<Response> {
    if (req.method !== 'POST') return new Response('Method not allowed', { status: 405 });
    const raw = new Uint8Array(await req.arrayBuffer());
    const verified =
      scheme === 'standard-webhooks'
        ? verifyStandardWebhook(raw, req.headers, signingSecret)
        : verifySignature(raw, req.headers.get('x-signature-256'), signingSecret);
    if (!verified) {
      log('rejected a request with a bad signature');
      return new Response('Invalid signature', { status: 401 });
    }
    let payload: { event?: unknown; data?: MessageCreated };
    try {
      payload = JSON.parse(new TextDecoder().decode(raw));
    } catch {
      return new Response('Malformed JSON', { status: 400 });
    }
    if (payload.event !== 'message.created' || !payload.data?.deliveryId) return new Response(null, { status: 204 });
    const event = payload.data;
    if (!seen.has(event.deliveryId)) {
      seen.add(event.deliveryId);
      // Not awaited: the service gets its answer before any agent work starts.
      setTimeout(() => void handOn(event), 0);
    }
    return new Response(null, { status: 204 });
  };
}

if (import.meta.main) {
  const env = (name: string) => {
    const value = process.env[name];
    if (!value) throw new Error(`Set ${name}.`);
    return value;
  };
  const handle = createWebhookHandler({
    signingSecret: env('SIGNING_SECRET').split(' ').filter(Boolean),
    scheme: process.env.SCHEME === 'x-signature-256' ? 'x-signature-256' : 'standard-webhooks',
    agentKey: env('AGENT_KEY'),
    serviceUrl: env('SERVICE_URL').replace(/\/$/, ''),
    onMessage: (event) => console.log(`new message ${event.messageId} from ${event.sender}: ${event.summary}`),
  });
  const server = Bun.serve({ port: Number(process.env.PORT ?? 8787), fetch: handle });
  console.log(`webhook handler listening on port ${server.port}`);
}
