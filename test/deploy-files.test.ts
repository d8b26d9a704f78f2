import { describe, expect, test } from 'bun:test';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigSchema, loadConfig } from '../src/config';
import { cloudNativePgManifests, containerFor, kubernetesManifests, read, type Container, type Manifest } from './support/deploy-files';
import { git, ROOT } from './support/releases';

// The deployment files, held to the service they deploy: every variable they set is one the
// service reads, ports and probe paths are the service's, and the image is built from what it
// needs and nothing else. (That the probes answer as intended on live processes:
// test/healthcheck.test.ts. The image itself is built by hand: docs/guides/deploy.md.)
const CONFIG_KEYS = Object.keys(ConfigSchema.properties);
const DEFAULT_PORT = loadConfig({}).PORT;

const dockerfile = read('Dockerfile');
const instructions = dockerfile
  .replace(/\\\n/g, ' ')
  .split('\n')
  .filter((line) => line.trim() && !line.trim().startsWith('#'))
  .map((line) => line.trim());
const argDefault = (name: string) => instructions.find((line) => line.startsWith(`ARG ${name}=`))?.slice(`ARG ${name}=`.length);
const uid = /^USER (\d+):(\d+)$/.exec(instructions.find((line) => line.startsWith('USER ')) ?? '');

describe('Dockerfile', () => {
  test('builds from the Bun the project is tested with and a Debian pinned to a point release', () => {
    const testedBun = /bun@(\d+\.\d+\.\d+)/.exec(read('.ci/run'))?.[1];
    const quickStartBun = /bun@(\d+\.\d+\.\d+)/.exec(read('README.md'))?.[1];
    expect([argDefault('BUN_IMAGE'), quickStartBun]).toEqual([`oven/bun:${testedBun}`, testedBun]);
    expect(argDefault('RUNTIME_IMAGE')).toMatch(/^debian:\d+\.\d+-slim$/);
    expect(instructions.filter((line) => line.startsWith('FROM '))).toEqual(['FROM ${BUN_IMAGE} AS build', 'FROM ${RUNTIME_IMAGE}']);
  });

  test('installs production dependencies only, and apt without questions', () => {
    expect(instructions).toContain('RUN bun install --frozen-lockfile --production --ignore-scripts');
    const apt = instructions.find((line) => line.includes('apt-get install'));
    expect(apt).toContain('DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates');
  });

  test('runs as a numeric non-root user, so that runAsNonRoot can check it', () => {
    expect(uid?.slice(1).map(Number)).toEqual([65534, 65534]);
  });

  test('checks health through the executable, with a start period, on the port it serves', () => {
    expect(instructions).toContain('HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 CMD ["/usr/local/bin/ams", "healthcheck"]');
    expect(instructions).toContain(`ENV HOST=0.0.0.0 PORT=${DEFAULT_PORT}`);
    expect(instructions).toContain(`EXPOSE ${DEFAULT_PORT}`);
  });

  test('carries the OCI labels: title, description, licence, version, revision, source', () => {
    const labels = Object.fromEntries(
      [...(instructions.find((line) => line.startsWith('LABEL ')) ?? '').matchAll(/(org\.opencontainers\.image\.\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]),
    );
    expect(Object.keys(labels).sort()).toEqual(
      ['description', 'licenses', 'revision', 'source', 'title', 'version'].map((key) => `org.opencontainers.image.${key}`),
    );
    expect(labels['org.opencontainers.image.licenses']).toBe(JSON.parse(read('package.json')).license);
    expect(labels['org.opencontainers.image.version']).toBe('${VERSION}');
  });
});

describe('.dockerignore', () => {
  // Docker's rule: the last pattern that matches a path or one of its parents decides.
  const patterns = read('.dockerignore')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'));
  const sent = (path: string) => {
    const segments = path.split('/');
    const prefixes = segments.map((_, i) => segments.slice(0, i + 1).join('/'));
    let included = true;
    for (const pattern of patterns) {
      const negated = pattern.startsWith('!');
      const glob = new Bun.Glob(negated ? pattern.slice(1) : pattern);
      if (prefixes.some((prefix) => glob.match(prefix))) included = negated;
    }
    return included;
  };
  const copied = instructions
    .filter((line) => line.startsWith('COPY ') && !line.includes('--from='))
    .flatMap((line) => line.split(/\s+/).slice(1, -1));

  test('lets in everything the Dockerfile copies, and each of those exists', () => {
    expect(copied).toEqual(['package.json', 'bun.lock', 'patches', 'tsconfig.json', 'sql', 'src', 'LICENSE']);
    expect(copied.filter((path) => !sent(path) || !sent(`${path}/x.ts`) || !existsSync(join(ROOT, path)))).toEqual([]);
  });

  test('keeps out dependencies, history, databases, builds, and every committed file the build does not copy', () => {
    const kept = ['node_modules/elysia/package.json', '.git/HEAD', 'data/pg/PG_VERSION', '.test-data/base/1', 'dist/ams', 'bench/results.json', '.env'];
    expect(kept.filter(sent)).toEqual([]);
    const committed = git(['ls-files']).split('\n').filter(Boolean);
    const copiedFile = (file: string) => copied.some((path) => file === path || file.startsWith(`${path}/`));
    expect(committed.filter((file) => sent(file) !== copiedFile(file))).toEqual([]);
  });
});

describe('compose.yaml', () => {
  type Service = {
    image?: string;
    command?: string[];
    profiles?: string[];
    environment: Record<string, string>;
    depends_on?: Record<string, { condition: string }>;
    healthcheck?: { test: string[] };
    volumes?: string[];
    ports?: string[];
  };
  const text = read('compose.yaml');
  const compose = Bun.YAML.parse(text) as { services: Record<string, Service>; volumes: Record<string, unknown> };
  const { db, ams, worker } = compose.services;

  test('PostgreSQL, the server and an optional worker', () => {
    expect(Object.keys(compose.services)).toEqual(['db', 'ams', 'worker']);
    expect([ams!.command, worker!.command, ams!.profiles, worker!.profiles]).toEqual([['serve'], ['worker'], undefined, ['separate-worker']]);
    expect(ams!.image).toBe(worker!.image);
  });

  test('every variable given to the service, or offered in a comment, is one the service reads', () => {
    const offered = [...text.matchAll(/^\s*#\s*([A-Z][A-Z0-9_]+):\s/gm)].map((m) => m[1]!);
    expect(offered.sort()).toEqual(['METRICS_TOKEN', 'METRICS_TOKEN', 'PUBLIC_URL', 'SMTP_FROM', 'SMTP_URL']);
    const given = [...Object.keys(ams!.environment), ...Object.keys(worker!.environment), ...offered];
    expect(given.filter((key) => !CONFIG_KEYS.includes(key))).toEqual([]);
  });

  test('the service reaches the database service by its name, with its user and database', () => {
    for (const service of [ams!, worker!]) {
      const url = new URL(service.environment.DATABASE_URL!.replace('${POSTGRES_PASSWORD:-ams}', 'secret'));
      expect([url.hostname, url.port, url.username, url.pathname]).toEqual(['db', '5432', db!.environment.POSTGRES_USER!, `/${db!.environment.POSTGRES_DB}`]);
      expect(service.depends_on).toEqual({ db: { condition: 'service_healthy' } });
    }
  });

  test('PostgreSQL keeps its data in a volume and says when it is ready', () => {
    expect(db!.volumes).toEqual(['pgdata:/var/lib/postgresql']);
    expect(Object.keys(compose.volumes)).toEqual(['pgdata']);
    expect(db!.healthcheck!.test).toEqual(['CMD', 'pg_isready', '--host=127.0.0.1', `--username=${db!.environment.POSTGRES_USER}`, `--dbname=${db!.environment.POSTGRES_DB}`]);
  });

  test('the server publishes the port it listens on, and both keep the image\'s health check', () => {
    expect(ams!.ports).toEqual([`\${AMS_PORT:-3000}:${DEFAULT_PORT}`]);
    expect([ams!.healthcheck, worker!.healthcheck]).toEqual([undefined, undefined]);
  });
});

describe('deploy/kubernetes', () => {
  const manifests = kubernetesManifests();
  const byKind = (kind: string) => manifests.filter((m) => m.kind === kind);
  const server = containerFor('serve');
  const worker = containerFor('worker');
  const secret = Bun.YAML.parse(read('deploy/kubernetes/secret.example.yaml')) as Manifest;

  test('a Deployment each for the server and the worker, a Service and a disruption budget; the Secret is the operator\'s own', () => {
    expect(manifests.map((m) => m.kind)).toEqual(['Deployment', 'Deployment', 'Service', 'PodDisruptionBudget']);
    expect(secret.kind).toBe('Secret');
  });

  // No image is published: a tag that reads as a version must be a release that exists (a CHANGELOG
  // heading) and has what the probes ask for (0.2.0 on); anything else is a placeholder that cannot
  // pass for one.
  test('the image it names is a release that exists and has what the probes ask for, or plainly a placeholder', () => {
    const { images } = Bun.YAML.parse(read('deploy/kubernetes/kustomization.yaml')) as { images: { name: string; newTag: string }[] };
    expect(images.map((image) => image.name)).toEqual([server.image]);
    const tag = images[0]!.newTag;
    const releases = [...read('CHANGELOG.md').matchAll(/^## (\d+\.\d+\.\d+) /gm)].map((m) => m[1]!);
    const usable = releases.filter((version) => Bun.semver.order(version, '0.2.0') >= 0);
    expect([tag, /\d/.test(tag) ? usable.includes(tag) : true]).toEqual([tag, true]);
  });

  test('every variable set is one the service reads, and every secret it refers to is in the Secret', () => {
    for (const container of [server, worker]) {
      expect(container.env.map((e) => e.name).filter((name) => !CONFIG_KEYS.includes(name))).toEqual([]);
      const refs = container.env.flatMap((e) => (e.valueFrom ? [e.valueFrom.secretKeyRef] : []));
      expect(refs.filter((ref) => ref.name !== secret.metadata.name || !(ref.key in secret.stringData!))).toEqual([]);
    }
    expect(Object.keys(secret.stringData!).filter((key) => !CONFIG_KEYS.includes(key))).toEqual([]);
    expect(server.env.find((e) => e.name === 'WORKER')?.value).toBe('off');
  });

  const port = (container: Container) => Number(container.env.find((e) => e.name === 'PORT')?.value ?? DEFAULT_PORT);
  const probes = (container: Container) => {
    const named = (probe: { httpGet: { port: string | number } }) => container.ports.find((p) => p.name === probe.httpGet.port)?.containerPort;
    return [container.startupProbe, container.readinessProbe, container.livenessProbe].map((p) => [p.httpGet.path, named(p)]);
  };

  test('probes ask the port the process listens on: readiness /health, startup and liveness /health/live', () => {
    for (const container of [server, worker]) {
      expect(probes(container)).toEqual([
        ['/health/live', port(container)],
        ['/health', port(container)],
        ['/health/live', port(container)],
      ]);
    }
  });

  test('runs as the image\'s user, read-only, with no privileges, with resources requested', () => {
    const pods = byKind('Deployment').map((d) => d.spec.template.spec.securityContext);
    expect(pods.map((p) => [p.runAsNonRoot, p.runAsUser, p.runAsGroup])).toEqual([
      [true, Number(uid![1]), Number(uid![2])],
      [true, Number(uid![1]), Number(uid![2])],
    ]);
    for (const container of [server, worker]) {
      expect(container.securityContext).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
      expect(container.volumeMounts).toEqual([{ name: 'tmp', mountPath: '/tmp' }]);
      expect(Object.keys(container.resources.requests).sort()).toEqual(['cpu', 'memory']);
      expect(Object.keys(container.resources.limits)).toEqual(['memory']);
    }
  });

  test('the Service and the disruption budget select the server\'s pods', () => {
    const deployments = byKind('Deployment');
    const serverPods = deployments.find((d) => d.spec.template.spec.containers[0].args[0] === 'serve')!.spec.template.metadata.labels;
    const workerPods = deployments.find((d) => d.spec.template.spec.containers[0].args[0] === 'worker')!.spec.template.metadata.labels;
    const selects = (selector: Record<string, string>, labels: Record<string, string>) => Object.entries(selector).every(([k, v]) => labels[k] === v);
    const service = byKind('Service')[0]!;
    const budget = byKind('PodDisruptionBudget')[0]!;
    expect([selects(service.spec.selector, serverPods), selects(service.spec.selector, workerPods)]).toEqual([true, false]);
    expect([selects(budget.spec.selector.matchLabels, serverPods), selects(budget.spec.selector.matchLabels, workerPods)]).toEqual([true, false]);
    expect(service.spec.ports.map((p: { targetPort: string }) => p.targetPort)).toEqual([server.ports[0]!.name]);
    for (const d of deployments) expect(selects(d.spec.selector.matchLabels, d.spec.template.metadata.labels)).toBe(true);
  });

  test('the server rolls out beside the old version and keeps it until the new one is ready; the worker is replaced', () => {
    const rollout = (role: string) => byKind('Deployment').find((d) => d.spec.template.spec.containers[0].args[0] === role)!.spec.strategy;
    expect(rollout('serve')).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
    expect(rollout('worker')).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } });
  });

  test('a drain takes one server at a time and never hangs on pods the database outage made unready', () => {
    const budget = byKind('PodDisruptionBudget')[0]!.spec;
    expect([budget.maxUnavailable, budget.minAvailable, budget.unhealthyPodEvictionPolicy]).toEqual([1, undefined, 'AlwaysAllow']);
  });

  test('connections at the most, a rollout\'s surge included, stay within PostgreSQL\'s default 100 less its 3 reserved', () => {
    const setting = (container: Container, key: 'DB_POOL_SIZE' | 'WEBHOOK_CONCURRENCY') =>
      Number(container.env.find((e) => e.name === key)?.value ?? loadConfig({})[key]);
    const deployment = (role: string) => byKind('Deployment').find((d) => d.spec.template.spec.containers[0].args[0] === role)!.spec;
    const servers = (deployment('serve').replicas + 1) * (setting(server, 'DB_POOL_SIZE') + 1);
    // graphile-worker's LISTEN and cron, the doorbell's two statements, our LISTEN.
    const workers = deployment('worker').replicas * (setting(worker, 'DB_POOL_SIZE') + setting(worker, 'WEBHOOK_CONCURRENCY') + 5);
    expect(servers + workers).toBe(80);
    expect(servers + workers).toBeLessThanOrEqual(97);
  });
});

describe('deploy/kubernetes/cloudnativepg', () => {
  const manifests = cloudNativePgManifests();
  const only = (kind: string) => {
    const found = manifests.filter((m) => m.kind === kind);
    expect(found).toHaveLength(1);
    return found[0]!;
  };
  const cluster = only('Cluster');
  const pooler = only('Pooler');
  const containers = manifests.filter((m) => m.kind === 'Deployment').map((d) => d.spec.template.spec.containers[0] as Container);
  const secrets = Bun.YAML.parse(read('deploy/kubernetes/cloudnativepg/secret.example.yaml')) as Manifest[];
  const appSecret = secrets.find((s) => s.metadata.name === 'agent-messaging-service')!;
  const ownerSecret = secrets.find((s) => s.metadata.name === cluster.spec.bootstrap.initdb.secret.name)!;

  test('the example, a CloudNativePG Cluster and a PgBouncer Pooler in transaction mode in front of its primary', () => {
    expect(manifests.map((m) => m.kind)).toEqual(['Deployment', 'Deployment', 'Service', 'PodDisruptionBudget', 'Cluster', 'Pooler']);
    expect([cluster.apiVersion, pooler.apiVersion]).toEqual(['postgresql.cnpg.io/v1', 'postgresql.cnpg.io/v1']);
    expect(pooler.spec).toMatchObject({ cluster: { name: cluster.metadata.name }, type: 'rw', pgbouncer: { poolMode: 'transaction' } });
  });

  test('requests go to the Pooler, the session connection to the primary, reads that may lag to the replicas, as the Cluster\'s owner of its database', () => {
    for (const container of containers) {
      const refs = container.env.filter((e) => e.name.startsWith('DATABASE_')).map((e) => [e.name, e.valueFrom?.secretKeyRef.name, e.valueFrom?.secretKeyRef.key]);
      expect(refs).toEqual([
        ['DATABASE_URL', appSecret.metadata.name, 'DATABASE_URL'],
        ['DATABASE_DIRECT_URL', appSecret.metadata.name, 'DATABASE_DIRECT_URL'],
        ['DATABASE_REPLICA_URL', appSecret.metadata.name, 'DATABASE_REPLICA_URL'],
      ]);
      expect(container.env.map((e) => e.name).filter((name) => !CONFIG_KEYS.includes(name))).toEqual([]);
    }
    const { database, owner } = cluster.spec.bootstrap.initdb;
    const url = (key: string) => new URL(appSecret.stringData![key]!);
    const at = (key: string) => [url(key).username, url(key).hostname, url(key).pathname];
    expect([at('DATABASE_URL'), at('DATABASE_DIRECT_URL'), at('DATABASE_REPLICA_URL')]).toEqual([
      [owner, pooler.metadata.name, `/${database}`],
      [owner, `${cluster.metadata.name}-rw`, `/${database}`],
      [owner, `${cluster.metadata.name}-ro`, `/${database}`],
    ]);
    expect(ownerSecret.stringData).toEqual({ username: owner, password: url('DATABASE_URL').password });
    expect(Object.keys(appSecret.stringData!).filter((key) => !CONFIG_KEYS.includes(key))).toEqual([]);
    const config = loadConfig(appSecret.stringData);
    expect([config.DATABASE_URL, config.DATABASE_DIRECT_URL, config.DATABASE_REPLICA_URL]).toEqual([
      appSecret.stringData!.DATABASE_URL,
      appSecret.stringData!.DATABASE_DIRECT_URL,
      appSecret.stringData!.DATABASE_REPLICA_URL,
    ]);
  });

  test('the database bounds every statement as STATEMENT_TIMEOUT_MS does, since the pooler cannot pass the bound', () => {
    expect(cluster.spec.bootstrap.initdb.postInitApplicationSQL).toEqual([
      `ALTER DATABASE ${cluster.spec.bootstrap.initdb.database} SET statement_timeout = '${loadConfig({}).STATEMENT_TIMEOUT_MS}ms'`,
    ]);
  });

  test('PostgreSQL\'s connections: the Pooler\'s, and the session ones of every server (a surge included) and worker, within max_connections less its 3 reserved', () => {
    const replicas = (role: string) => manifests.find((m) => m.kind === 'Deployment' && m.spec.template.spec.containers[0].args[0] === role)!.spec.replicas;
    const pooled = pooler.spec.instances * Number(pooler.spec.pgbouncer.parameters.default_pool_size);
    // A server's LISTEN; a worker's LISTEN, graphile-worker's and its two plan-keeping connections.
    const sessions = (replicas('serve') + 1) * 1 + replicas('worker') * 4;
    expect(pooled + sessions).toBe(47);
    expect(pooled + sessions).toBeLessThanOrEqual(Number(cluster.spec.postgresql.parameters.max_connections) - 3);
  });
});
