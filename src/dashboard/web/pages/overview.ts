import { useEffect, useMemo, useState } from 'preact/hooks';
import { api, apiError } from '../shared/api.ts';
import { TimeChart, type ChartSeries } from '../shared/chart.ts';
import { useThrottled } from '../shared/hooks.ts';
import { html } from '../shared/html.ts';
import { useLive } from '../shared/live.ts';
import { query } from '../shared/query.ts';
import type { EndpointTrouble, Overview, OverviewHour } from '../shared/types.ts';
import { Time, plural, shortTime } from '../shared/ui.ts';
import { SpentLinkNotice, WaitingForYou } from './overview-waiting.ts';
import { AgentsOnline } from './agent-presence.ts';

// The first page a person opens: how the last day went and what needs them now. Every change the
// live stream reports may move a figure, but under steady traffic reading the whole overview on
// each would load the database for figures nobody can read that fast: once every few seconds.
const REFRESH_MS = 5_000;

// Bottom of the stack first: what went well at the foot, what failed on top, where the eye lands.
const OUTCOMES: [keyof Omit<OverviewHour, 'at' | 'doorbellP50Ms' | 'doorbellP95Ms'>, string, string][] = [
  ['fetched', 'Fetched', 'var(--good)'],
  ['delivered', 'Delivered', 'var(--good-light)'],
  ['notified', 'Notified', 'var(--accent)'],
  ['accepted', 'Accepted', 'var(--muted)'],
  ['retrying', 'Retrying', 'var(--warn)'],
  ['failed', 'Failed', 'var(--bad)'],
];

const agentLink = (username: string) => `/dashboard/agents${query({ q: username })}`;
const deliveriesLink = (agent: string, state: string) => `/dashboard/deliveries${query({ agent, state })}`;

function Charts({ hours }: { hours: OverviewHour[] }) {
  const times = useMemo(() => hours.map((h) => Date.parse(h.at) / 1000), [hours]);
  const outcomes = useMemo(
    (): ChartSeries[] => OUTCOMES.map(([key, label, color]) => ({ label, color, values: hours.map((h) => h[key]) })),
    [hours],
  );
  const latency = useMemo(
    (): ChartSeries[] => [
      { label: 'p50', color: 'var(--accent)', values: hours.map((h) => h.doorbellP50Ms) },
      { label: 'p95', color: 'var(--warn)', values: hours.map((h) => h.doorbellP95Ms) },
    ],
    [hours],
  );
  return html`<div class="charts">
    <section class="card" aria-labelledby="outcomes-heading">
      <h2 id="outcomes-heading">Deliveries per hour, by where each is now</h2>
      <${TimeChart} title="Deliveries accepted per hour, by outcome" series=${outcomes} times=${times} unit="deliveries" stacked />
    </section>
    <section class="card" aria-labelledby="latency-heading">
      <h2 id="latency-heading">Doorbell latency</h2>
      <p class="hint">From acceptance to the handler's 2xx answer, for the deliveries accepted in each hour.</p>
      <${TimeChart} title="Doorbell latency per hour, p50 and p95" series=${latency} times=${times} unit="ms" />
    </section>
  </div>`;
}

function TroubleLine({ t }: { t: EndpointTrouble }) {
  return html`<li class="line" data-trouble=${t.username}>
    <span class="line-text">
      <a href=${agentLink(t.username)}>${t.username}</a> — ${t.failure} — <a href=${deliveriesLink(t.username, 'failed')}
        >${plural(t.deliveries, 'delivery', 'deliveries')}</a> since <${Time} iso=${t.countedSince} short />
    </span>
    ${t.state === 'disabled' && t.disabledAt
      ? html`<span class="badge step-failed">Switched off at ${shortTime(t.disabledAt)}</span>`
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
    <${AgentsOnline} />
    <${WaitingForYou} holds=${overview.holds} version=${version} onDecided=${load} />
    <div class="attention-lists">
      <${Lines} id="trouble-heading" heading="Webhooks in trouble" empty="No webhook is failing." count=${overview.trouble.length}>
        ${overview.trouble.map((t) => html`<${TroubleLine} key=${t.username} t=${t} />`)}
      <//>
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
    <${Charts} hours=${overview.hours} />
  `;
}
