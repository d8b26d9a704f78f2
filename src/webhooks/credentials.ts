import type { SigningSecrets } from '../domain/agents/signing-secrets';

// Recipients' webhook URLs and signing secrets as the worker last loaded them, by agent and webhook
// version (notify-jobs.ts): saving a webhook again is a new version, so a changed URL is never a
// stale hit, only a miss. A rotated secret keeps the version: `secretVersion` (signing-secrets.ts)
// is what tells the worker that the secrets it holds are stale. Bounded, least recently used first out.
export type Credentials = { url: string; secrets: SigningSecrets; secretVersion: string };
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
      const { version: _, ...credentials } = found;
      return credentials;
    },
    remember(agentId, version, credentials) {
      byAgent.delete(agentId);
      byAgent.set(agentId, { version, ...credentials });
      if (byAgent.size > max) byAgent.delete(byAgent.keys().next().value!);
    },
  };
}
