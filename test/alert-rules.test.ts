import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { uniqueName, useHarness } from './support/harness';
import { eventually, receiver } from './support/receiver';
import { FAST_WEBHOOKS, post, untilStep } from './support/webhooks';

// The Prometheus alerting rules in docs/, held to Prometheus's own checker and unit tests
// (promtool) and to the series the service really exports.
const root = join(import.meta.dir, '..');
const RULES = 'docs/prometheus-alerts.yaml';
const UNIT_TESTS = 'test/fixtures/prometheus-alerts.test.yaml';
const TOKEN = 'scrape-me-0123456789';

type Rule = { alert: string; expr: string; for: string; labels: Record<string, string>; annotations: Record<string, string> };
type UnitTests = { tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[] };
const readYaml = async (path: string) => Bun.YAML.parse(await Bun.file(join(root, path)).text());
const rules = ((await readYaml(RULES)) as { groups: { rules: Rule[] }[] }).groups.flatMap((group) => group.rules);

// Debian's `prometheus` package ships promtool; .ci/run installs it. Without it the test fails,
// saying so, rather than passing on rules nobody checked.
function promtool(args: string[]) {
  const bin = Bun.which('promtool');
  if (!bin) throw new Error('promtool is not installed: apt-get install -y --no-install-recommends prometheus (Debian ships it there).');
  const run = Bun.spawnSync([bin, ...args], { cwd: root, stdout: 'pipe', stderr: 'pipe' });
  return { code: run.exitCode, stdout: run.stdout.toString(), stderr: run.stderr.toString() };
}

// A scrape of GET /metrics: each family's kind from its TYPE line (a labelled family nobody has
// observed yet has no sample, but is exported all the same), and every sample.
type Sample = { name: string; labels: Record<string, string>; value: number };
function parseScrape(text: string) {
  const kinds = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) kinds.set(type[1]!, type[2]!);
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!sample) continue;
    const labels: Record<string, string> = {};
    for (const [, name, value] of (sample[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[name!] = value!;
    samples.push({ name: sample[1]!, labels, value: Number(sample[3]) });
  }
  return { kinds, samples };
}

// The sample names a family is exported under: a histogram's series are its _bucket, _count and _sum.
const SUFFIXES: Record<string, string[]> = { histogram: ['_bucket', '_count', '_sum'], summary: ['', '_count', '_sum'] };
const sampleNames = (family: string, kind: string) => (SUFFIXES[kind] ?? ['']).map((suffix) => family + suffix);
// Counters and a histogram's series only grow; gauges are figures of the moment.
const grows = (name: string, kinds: Map<string, string>) =>
  [...kinds].some(([family, kind]) => (kind === 'counter' && name === family) || (kind === 'histogram' && sampleNames(family, kind).includes(name)));

const seriesRead = (expr: string) => [...new Set(expr.match(/\bams_[a-z0-9_]+/g))];
// Every `ams_…{label="value"}` matcher, with each value a regex alternation names.
const matchers = (expr: string) =>
  [...expr.matchAll(/\b(ams_[a-z0-9_]+)\{([^}]*)\}/g)].flatMap(([, name, inside]) =>
    [...inside!.matchAll(/(\w+)\s*(?:=~|!~|!=|=)\s*"([^"]*)"/g)].flatMap(([, label, values]) => values!.split('|').map((value) => ({ name: name!, label: label!, value }))),
  );
// Labels named in by (…) and without (…), less `instance`, which Prometheus adds to every target.
const groupingLabels = (expr: string) =>
  [...expr.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g)].flatMap(([, list]) => list!.split(',').map((label) => label.trim())).filter((label) => label !== 'instance');

// The service as `ams serve` wires it, on its own database, after one doorbell answered 2xx and one
// answered 503 (its retry scheduled far off, so it is still retrying when scraped).
const h = useHarness({ ...FAST_WEBHOOKS, WEBHOOK_RETRY_DELAYS_MS: '600000', METRICS_TOKEN: TOKEN }, { worker: true });
const hook = receiver((req) => new Response(req.path === '/down' ? 'no' : 'ok', { status: req.path === '/down' ? 503 : 200 }));
let scrape: ReturnType<typeof parseScrape>;
let dir: string;

beforeAll(async () => {
  const sender = await h.agent(uniqueName('sender'));
  const up = await h.agent(uniqueName('up'), { webhookUrl: hook.url('/up') });
  const down = await h.agent(uniqueName('down'), { webhookUrl: hook.url('/down') });
  const rung = await post(h, sender, up, { content: 'ring' });
  const refused = await post(h, sender, down, { content: 'ring' });
  await untilStep(h, rung.deliveryId, 'notified');
  await eventually(async () => (await h.db.sql`select 1 from deliveries where id = ${refused.deliveryId} and next_attempt_at is not null`).length === 1);
  // The loss audit's first run starts with the service and ends a moment later.
  scrape = await eventually(async () => {
    const parsed = parseScrape(String((await h.call('GET', '/metrics', { key: TOKEN })).body));
    return parsed.samples.some((sample) => sample.name === 'ams_loss_audit_drift') ? parsed : null;
  });
  dir = await mkdtemp(join(tmpdir(), 'ams-alert-rules-'));
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true });
});

test('promtool finds the rule file valid', () => {
  expect(promtool(['check', 'rules', RULES])).toEqual({ code: 0, stdout: `Checking ${RULES}\n  SUCCESS: 9 rules found\n\n`, stderr: '' });
});

test("promtool's unit tests pass, and they make every alert both fire and stay quiet", async () => {
  expect(promtool(['test', 'rules', UNIT_TESTS])).toEqual({ code: 0, stdout: `Unit Testing:  ${UNIT_TESTS}\n  SUCCESS\n\n`, stderr: '' });
  const cases = ((await readYaml(UNIT_TESTS)) as UnitTests).tests.flatMap((t) => t.alert_rule_test);
  const alerts = rules.map((rule) => rule.alert).sort();
  expect([...new Set(cases.filter((c) => c.exp_alerts.length > 0).map((c) => c.alertname))].sort()).toEqual(alerts);
  expect([...new Set(cases.filter((c) => c.exp_alerts.length === 0).map((c) => c.alertname))].sort()).toEqual(alerts);
});

test('every rule has its severity, a summary, a description and a runbook entry in docs/reference/metrics-and-logs.md', async () => {
  expect(rules.map((rule) => [rule.alert, rule.for, rule.labels.severity])).toEqual([
    ['AmsWebhookEndpointDisabled', '0m', 'warning'],
    ['AmsWebhookEndpointsFailing', '15m', 'warning'],
    ['AmsDoorbellFailureRate', '10m', 'warning'],
    ['AmsDeliveriesStalled', '15m', 'warning'],
    ['AmsLossAuditDrift', '5m', 'critical'],
    ['AmsDoorbellsLate', '5m', 'critical'],
    ['AmsMetricsDatabaseReadsFailing', '5m', 'critical'],
    ['AmsHoldsWaitingLong', '10m', 'warning'],
    ['AmsOperatorWebhookFailing', '30m', 'warning'],
  ]);
  for (const rule of rules) {
    expect([rule.alert, Object.keys(rule).sort(), Object.keys(rule.labels), Object.keys(rule.annotations).sort()]).toEqual([
      rule.alert,
      ['alert', 'annotations', 'expr', 'for', 'labels'],
      ['severity'],
      ['description', 'runbook', 'summary'],
    ]);
    expect(rule.annotations.runbook).toBe(`docs/reference/metrics-and-logs.md#${rule.alert.toLowerCase()}`);
  }
  // Each runbook anchor is the heading of that alert's entry, in the rules' order.
  const operations = await Bun.file(join(root, 'docs/reference/metrics-and-logs.md')).text();
  const section = operations.slice(operations.indexOf('\n## Alerting rules\n')).split(/\n## (?!Alerting rules\n)/)[0]!;
  expect([...section.matchAll(/^### (\S+)$/gm)].map((heading) => heading[1])).toEqual(rules.map((rule) => rule.alert));
});

test('every series, label and label value the rules read is one the service exports', () => {
  const exported = new Set([...scrape.kinds].flatMap(([family, kind]) => sampleNames(family, kind)));
  const read = [...new Set(rules.flatMap((rule) => seriesRead(rule.expr)))].sort();
  expect(read).toEqual([
    'ams_deliveries_stalled',
    'ams_doorbell_attempt_duration_seconds_count',
    'ams_doorbell_oldest_due_seconds',
    'ams_holds_oldest_age_seconds',
    'ams_loss_audit_drift',
    'ams_metrics_database_read_failures_total',
    'ams_operator_webhooks',
    'ams_webhook_endpoints',
  ]);
  expect(read.filter((name) => !exported.has(name))).toEqual([]);
  const seen = (name: string, label: string, value?: string) =>
    scrape.samples.some((sample) => sample.name === name && label in sample.labels && (value === undefined || sample.labels[label] === value));
  const unseen = rules.flatMap((rule) => [
    ...matchers(rule.expr).filter(({ name, label, value }) => !seen(name, label, value)).map(({ name, label, value }) => `${rule.alert}: ${name}{${label}="${value}"}`),
    ...groupingLabels(rule.expr).filter((label) => !seriesRead(rule.expr).some((name) => seen(name, label))).map((label) => `${rule.alert}: ${label}`),
  ]);
  expect(unseen).toEqual([]);
});

test("on a real service's series, where one handler answers 503, only the doorbell failure rate fires", async () => {
  // This scrape held for two hours, each counter growing by its figure every minute: as if one
  // doorbell a minute were answered 2xx and one 503.
  const read = new Set(rules.flatMap((rule) => seriesRead(rule.expr)));
  const input_series = scrape.samples
    .filter((sample) => read.has(sample.name))
    .map(({ name, labels, value }) => ({
      series: `${name}{${Object.entries({ ...labels, job: 'ams', instance: 'real:3000' }).map(([label, v]) => `${label}="${v}"`).join(',')}}`,
      values: grows(name, scrape.kinds) ? `0+${value}x120` : `${value}x120`,
    }));
  const firing = {
    AmsDoorbellFailureRate: [
      {
        exp_labels: { severity: 'warning', job: 'ams' },
        exp_annotations: {
          summary: '50% of doorbell attempts failing',
          description: '50% of doorbell attempts over the last 15 minutes were not answered 2xx. Either a few busy endpoints fail, or the service cannot reach handlers at all.',
          runbook: 'docs/reference/metrics-and-logs.md#amsdoorbellfailurerate',
        },
      },
    ],
  } as Record<string, unknown[]>;
  const unitTests = {
    rule_files: [join(root, RULES)],
    evaluation_interval: '1m',
    tests: [{ interval: '1m', input_series, alert_rule_test: rules.map(({ alert }) => ({ eval_time: '90m', alertname: alert, exp_alerts: firing[alert] ?? [] })) }],
  };
  const path = join(dir, 'real-series.test.yaml');
  await writeFile(path, JSON.stringify(unitTests, null, 2));
  expect(promtool(['test', 'rules', path])).toEqual({ code: 0, stdout: `Unit Testing:  ${path}\n  SUCCESS\n\n`, stderr: '' });
});
