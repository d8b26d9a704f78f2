import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './releases';

export const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

export type Probe = { httpGet: { path: string; port: string | number } };
export type Container = {
  name: string;
  image: string;
  args: string[];
  ports: { name: string; containerPort: number }[];
  env: { name: string; value?: string; valueFrom?: { secretKeyRef: { name: string; key: string; optional?: boolean } } }[];
  startupProbe: Probe;
  readinessProbe: Probe;
  livenessProbe: Probe;
  resources: { requests: Record<string, string>; limits: Record<string, string> };
  securityContext: Record<string, unknown>;
  volumeMounts: { name: string; mountPath: string }[];
};
export type Manifest = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels: Record<string, string> };
  spec: any;
  stringData?: Record<string, string>;
};

// The Kubernetes example, in the order its kustomization lists it.
export function kubernetesManifests(): Manifest[] {
  const kustomization = Bun.YAML.parse(read('deploy/kubernetes/kustomization.yaml')) as { resources: string[] };
  return kustomization.resources.map((file) => Bun.YAML.parse(read(`deploy/kubernetes/${file}`)) as Manifest);
}

// The one container of the Deployment whose pods run `ams <role>`.
export function containerFor(role: 'serve' | 'worker'): Container {
  const containers = kubernetesManifests()
    .filter((m) => m.kind === 'Deployment')
    .flatMap((m) => m.spec.template.spec.containers as Container[])
    .filter((c) => c.args[0] === role);
  if (containers.length !== 1) throw new Error(`expected one container running "${role}", found ${containers.length}`);
  return containers[0]!;
}
