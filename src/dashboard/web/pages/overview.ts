import { useEffect, useMemo, useState } from 'preact/hooks';
import { api, apiError } from '../shared/api.ts';
import { TimeChart, type ChartSeries } from '../shared/chart.ts';
import { useThrottled } from '../shared/hooks.ts';
import { html } from '../shared/html.ts';
import { useLive } from '../shared/live.ts';
import { query } from '../shared/query.ts';
import type { EndpointTrouble, Headline, Overview, OverviewBin, Page } from '../shared/types.ts';
import { FailureReason, WarningLine } from '../shared/endpoint-trouble.ts';
import { Time, formatPercent, plural, shortTime } from '../shared/ui.ts';
import { SpentLinkNotice, WaitingForYou } from './overview-waiting.ts';
import { AgentsOnline } from './agent-presence.ts';

// The first page a person opens: how the last day went and what needs them now. Every change the
// live stream reports may move a figure, but under steady traffic reading the whole overview on
// each would load the database for figures nobody can read that fast: once every few seconds.
const REFRESH_MS = 5_000;

// Bottom of the stack first: what went well at the foot, what failed on top, where the eye lands.
// Accepted deliveries are two bands: mail a polling agent has yet to fetch is no backlog of the
// service's (a calm colour), a doorbell the service still owes is.
const OUTCOMES: [keyof Omit<OverviewBin, 'at' | 'doorbellP50Ms' | 'doorbellP95Ms'>, string, string][] = [
  ['fetched', 'Fetched', 'var(--good)'],
  ['delivered', 'Delivered', 'var(--good-light)'],
  ['notified', 'Notified', 'var(--accent)'],
  ['waitingForPoll', 'Waiting for a poll', 'var(--poll)'],
  ['doorbellOwed', 'Doorbell owed', 'var(--muted)'],
  ['retrying', 'Retrying', 'var(--warn)'],
  ['failed', 'Failed', 'var(--bad)'],
];

const agentLink = (username: string) => `/dashboard/agents${query({ q: username })}`;
const deliveriesLink = (agent: string, state: string) => `/dashboard/deliveries${query({ agent, state })}`;
const agentsByHealth = (health: string) => `/dashboard/agents${query({ health, sort: 'trouble' })}`;
export const TROUBLE_FILTER = 'disabled,failing';

// The states of a webhook as the headline names them, in trouble first; a state this page does not
// know (one added since) is named as the API spells it, after the known states in trouble.
const ENDPOINT_STATES: [string, string][] = [
  ['disabled', 'switched off'],
  ['failing', 'failing'],
  ['paused', 'paused'],
  ['untried', 'not tried yet'],
  ['healthy', 'healthy'],
];
function endpointStates(counts: Record<string, number>): [string, string, number][] {
  const known = new Map(ENDPOINT_STATES);
  const others = Object.keys(counts).filter((k) => !known.has(k)).sort().map((k): [string, string] => [k, k.replaceAll('-', ' ')]);
  return [...ENDPOINT_STATES.slice(0, 2), ...others, ...ENDPOINT_STATES.slice(2)].map(([state, label]) => [state, label, counts[state] ?? 0]);
}

const binName = (minutes: number) => (minutes === 60 ? 'hour' : `${minutes} minutes`);

// The day in figures, each saying what it counts; every one links to the list behind it.
function Headlines({ headline, holds, since }: { headline: Headline; holds: number; since: string }) {
  const rate = (part: number, whole: number) => (whole === 0 ? '–' : formatPercent(part / whole));
  return html`<section class="card headline" aria-labelledby="headline-heading">
    <h2 id="headline-heading" class="sr">At a glance</h2>
    <dl class="headline-figures">
      <div data-headline="failed">
        <dt>Deliveries failed</dt>
        <dd><span class="big">${rate(headline.failed, headline.deliveries)}</span>
          <span class="hint"><a href=${`/dashboard/deliveries${query({ state: 'failed', from: since })}`}>${headline.failed.toLocaleString()}</a> of ${plural(headline.deliveries, 'delivery', 'deliveries')} accepted in the last 24 hours</span></dd>
      </div>
      <div data-headline="attempts">
        <dt>Doorbell attempts not answered 2xx</dt>
        <dd><span class="big">${rate(headline.attemptsFailed, headline.attempts)}</span>
          <span class="hint">${headline.attemptsFailed.toLocaleString()} of ${plural(headline.attempts, 'attempt')} at webhooks in the last 24 hours</span></dd>
      </div>
      <div data-headline="endpoints">
        <dt>Webhooks</dt>
        <dd><ul class="states">${endpointStates(headline.endpoints).map(([state, label, n]) => html`<li key=${state} class=${n > 0 ? `state-${state}` : 'none'}>
          ${n > 0 ? html`<a href=${agentsByHealth(state)}>${n} ${label}</a>` : `${n} ${label}`}</li>`)}</ul></dd>
      </div>
      <div data-headline="holds">
        <dt>Holds waiting</dt>
        <dd><span class="big">${holds > 0 ? html`<a href="#waiting">${holds}</a>` : '0'}</span>
          <span class="hint">${holds > 0 ? 'messages wait for a person, below' : 'no message waits for a person'}</span></dd>
      </div>
      <div data-headline="stalled">
        <dt>Agents with stalled deliveries</dt>
        <dd><span class="big">${headline.stalledAgents > 0 ? html`<a href=${`/dashboard/deliveries${query({ state: 'stalled' })}`}>${headline.stalledAgents}</a>` : '0'}</span>
          <span class="hint">handlers that were rung and never reported</span></dd>
      </div>
    </dl>
  </section>`;
}

function Charts({ overview }: { overview: Overview }) {
  const { bins, binMinutes } = overview;
  const times = useMemo(() => bins.map((h) => Date.parse(h.at) / 1000), [bins]);
  const outcomes = useMemo(
    (): ChartSeries[] => OUTCOMES.map(([key, label, color]) => ({ label, color, values: bins.map((h) => h[key]) })),
    [bins],
  );
  const latency = useMemo(
    (): ChartSeries[] => [
      { label: 'p50', color: 'var(--accent)', values: bins.map((h) => h.doorbellP50Ms), overall: overview.doorbellP50Ms },
      { label: 'p95', color: 'var(--warn)', values: bins.map((h) => h.doorbellP95Ms), overall: overview.doorbellP95Ms },
    ],
    [bins],
  );
  const per = binName(binMinutes);
  return html`<div class="charts">
    <section class="card" aria-labelledby="outcomes-heading">
      <h2 id="outcomes-heading">Deliveries per ${per}, by where each is now</h2>
      <p class="hint">From <${Time} iso=${bins[0]!.at} short />, the first ${per} with a delivery in the last 24 hours. Beside each band: its total.</p>
      <${TimeChart} title=${`Deliveries accepted per ${per}, by outcome`} series=${outcomes} times=${times} unit="deliveries" stacked overallLabel="In all" />
    </section>
    <section class="card" aria-labelledby="latency-heading">
      <h2 id="latency-heading">Doorbell latency</h2>
      <p class="hint">From acceptance to the handler's 2xx answer, for the deliveries accepted in each ${per}; beside each line, the figure over all of them.</p>
      <${TimeChart} title=${`Doorbell latency per ${per}, p50 and p95`} series=${latency} times=${times} unit="ms" overallLabel="Over all" />
    </section>
  </div>`;
}

function TroubleLine({ t }: { t: EndpointTrouble }) {
  return html`<li class="line" data-trouble=${t.username}>
    <span class="line-text">
      <a href=${agentLink(t.username)}>${t.username}</a> — <${FailureReason} facts=${{ status: t.lastFailureStatus, error: t.failure, body: t.lastFailureBody }} /> — <a href=${deliveriesLink(t.username, 'failed')}
        >${plural(t.deliveries, 'delivery', 'deliveries')}</a> since <${Time} iso=${t.countedSince} short />
      ${t.state === 'failing' ? html`<${WarningLine} facts=${t} />` : null}
    </span>
    ${t.state === 'disabled' && t.disabledAt
      ? html`<span class="badge step-failed">Switched off at ${shortTime(t.disabledAt)}</span>`
      : t.state === 'paused' && t.disabledAt
        ? html`<span class="badge muted">Paused at ${shortTime(t.disabledAt)}</span>`
        : html`<span class="badge retrying">Failing since ${shortTime(t.failingSince)}</span>`}
    <code class="url hint">${t.url}</code>
  </li>`;
}

// A list that says in plain words when there is nothing in it.
function Lines({ id, heading, empty, children, count }: { id: string; heading: string; empty: string; children: unknown; count: number }) {
  return html`<section class="card" aria-labelledby=${id}>
    <h2 id=${id}>${heading}</h2>
    ${count === 0 ? html`<p class="hint">${empty}</p>` : html`<ul class="lines">${children}</ul>`}
  </section>`;
}

const TROUBLE_PAGE = 50;
// The most one read answers (the dashboard's list window): past it, the Agents page pages on.
const TROUBLE_MOST = 500;

// Every webhook in trouble: how many, grouped by what fails, the first few lines, and all of them
// on demand (a page at a time, read again with the Overview while shown).
function Trouble({ overview, version }: { overview: Overview; version: number }) {
  const [all, setAll] = useState<Page<EndpointTrouble> | null>(null);
  const [shown, setShown] = useState(0);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (shown === 0) return setAll(null);
    api<Page<EndpointTrouble>>('GET', `/overview/trouble${query({ limit: String(shown) })}`).then(
      (page) => {
        setAll(page);
        setError(null);
      },
      (e) => setError(apiError(e).message),
    );
  }, [shown, version]);
  const { troubleTotal: total, troubleGroups: groups } = overview;
  const lines = all?.items ?? overview.trouble;
  return html`<section class="card trouble" aria-labelledby="trouble-heading">
    <h2 id="trouble-heading">Webhooks in trouble${total > 0 ? html` <span class="badge retrying" data-trouble-total>${total}</span>` : null}</h2>
    ${total === 0
      ? html`<p class="hint">No webhook is failing.</p>`
      : html`<ul class="trouble-groups" aria-label="By what fails">
          ${groups.map((g) => html`<li key=${g.failure} data-trouble-group=${g.failure}><b>${g.failure}</b> — ${plural(g.endpoints, 'endpoint')}${g.disabled > 0
            ? ` (${g.disabled} switched off)`
            : ''}</li>`)}
        </ul>
        <ul class="lines">${lines.map((t) => html`<${TroubleLine} key=${t.username} t=${t} />`)}</ul>
        ${error ? html`<p class="notice problem" role="alert">Could not read the whole list: ${error}</p>` : null}
        <div class="inline-center">
          ${total > lines.length && shown < TROUBLE_MOST
            ? html`<button type="button" class="quiet" onClick=${() => setShown(Math.max(shown + TROUBLE_PAGE, TROUBLE_PAGE))}>${shown === 0
                ? `Show all ${total}`
                : `Show ${Math.min(TROUBLE_PAGE, total - lines.length)} more`}</button>`
            : null}
          ${shown > 0 ? html`<button type="button" class="quiet" onClick=${() => setShown(0)}>Show the first ${overview.trouble.length}</button>` : null}
          <a href=${agentsByHealth(TROUBLE_FILTER)}>On the Agents page</a>
        </div>`}
  </section>`;
}

export function OverviewPage() {
  const [overview, setOverview] = useState<Overview | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [version, setVersion] = useState(0);
  const load = async () => {
    try {
      setOverview(await api<Overview>('GET', '/overview'));
      setVersion((v) => v + 1);
      setError(null);
    } catch (e) {
      setError(apiError(e).message);
    }
  };
  const refresh = useThrottled(load, REFRESH_MS);
  useEffect(() => {
    load();
  }, []);
  useLive(refresh);

  if (!overview) {
    return html`<h1>Overview</h1>
      ${error
        ? html`<div class="notice problem" role="alert"><p>Could not load the overview: ${error}</p><button type="button" onClick=${load}>Try again</button></div>`
        : html`<p class="hint placeholder" role="status">Loading the overview…</p>`}`;
  }
  return html`
    <h1>Overview</h1>
    <p class="hint">The last 24 hours, from <${Time} iso=${overview.since} short />, read again as deliveries move.</p>
    ${error ? html`<p class="notice problem" role="alert">Could not refresh the overview: ${error} What is shown may be out of date.</p>` : null}
    <${SpentLinkNotice} />
    <${Headlines} headline=${overview.headline} holds=${overview.holds.waiting} since=${overview.since} />
    <${WaitingForYou} holds=${overview.holds} version=${version} onDecided=${load} />
    <${AgentsOnline} />
    <div class="attention-lists">
      <${Trouble} overview=${overview} version=${version} />
      <${Lines} id="stalled-heading" heading="Stalled agents" empty="No agent has stalled deliveries: every handler reports what it was notified of." count=${overview.stalledAgents.length}>
        ${overview.stalledAgents.map((s) => html`<li key=${s.username} class="line">
          <span class="line-text"><a href=${deliveriesLink(s.username, 'stalled')}>${s.username}</a> — ${plural(s.stalled, 'stalled delivery', 'stalled deliveries')},
            the oldest notified <${Time} iso=${s.oldestNotifiedAt} short /></span>
        </li>`)}
      <//>
      <${Lines} id="close-heading" heading="Close requests" empty="No close requests wait for a decision." count=${overview.closeRequests.length}>
        ${overview.closeRequests.map((c) => html`<li key=${c.threadId} class="line">
          <span class="line-text"><a href=${`/dashboard/threads/${c.threadId}`}>${c.title}</a>${c.requestedAt
            ? html` — asked <${Time} iso=${c.requestedAt} short />`
            : null}</span>
        </li>`)}
      <//>
    </div>
    <${Charts} overview=${overview} />
  `;
}
