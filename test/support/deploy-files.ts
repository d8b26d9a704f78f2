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

type Kustomization = { resources: string[]; patches?: { target: { kind: string; name: string }; path: string }[] };
type PatchOp = { op: 'add'; path: string; value: unknown };

// The CloudNativePG variant as kustomize renders it: the example (its `..`), its own resources, and
// its JSON patches, of which it uses only `add`.
export function cloudNativePgManifests(): Manifest[] {
  const dir = 'deploy/kubernetes/cloudnativepg';
  const kustomization = Bun.YAML.parse(read(`${dir}/kustomization.yaml`)) as Kustomization;
  const manifests = kustomization.resources.flatMap((file) =>
    file === '..' ? kubernetesManifests() : [Bun.YAML.parse(read(`${dir}/${file}`)) as Manifest],
  );
  for (const patch of kustomization.patches ?? []) {
    const targets = manifests.filter((m) => m.kind === patch.target.kind && m.metadata.name === patch.target.name);
    if (targets.length !== 1) throw new Error(`the patch ${patch.path} targets ${targets.length} manifests`);
    for (const op of Bun.YAML.parse(read(`${dir}/${patch.path}`)) as PatchOp[]) {
      if (op.op !== 'add') throw new Error(`the patch ${patch.path} uses ${op.op}`);
      const steps = op.path.split('/').slice(1);
      const last = steps.pop()!;
      const parent = steps.reduce((node: any, step) => node[step], targets[0]);
      if (last === '-') parent.push(structuredClone(op.value));
      else parent[last] = structuredClone(op.value);
    }
  }
  return manifests;
}
