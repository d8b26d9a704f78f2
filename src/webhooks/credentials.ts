// Recipients' webhook URLs and signing secrets as the worker last loaded them, by agent and webhook
// version (notify-jobs.ts): saving a webhook again is a new version, so a changed secret is never
// a stale hit, only a miss. Bounded, least recently used first out.
export type Credentials = { url: string; secret: string };
export type WebhookCredentials = {
  get(agentId: string, version: string): Credentials | undefined;
  remember(agentId: string, version: string, credentials: Credentials): void;
};

export function rememberWebhooks(max = 5_000): WebhookCredentials {
  const byAgent = new Map<string, Credentials & { version: string }>();
  return {
    get(agentId, version) {
      const found = byAgent.get(agentId);
      if (!found || found.version !== version) return undefined;
      byAgent.delete(agentId);
      byAgent.set(agentId, found);
      return { url: found.url, secret: found.secret };
    },
    remember(agentId, version, { url, secret }) {
      byAgent.delete(agentId);
      byAgent.set(agentId, { version, url, secret });
      if (byAgent.size > max) byAgent.delete(byAgent.keys().next().value!);
    },
  };
}
