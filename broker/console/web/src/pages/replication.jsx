// Geo-replication across the namespaces this user can see: every topic's
// replicators of each namespace whose policies name more than one
// cluster, and per remote cluster the summed backlog and largest delay.
import { useRef } from 'preact/hooks';
import { getJSON } from '../api.js';
import { formatCount, formatRate, formatSeconds } from '../format.js';
import { usePoll } from '../poll.js';
import { links } from '../router.js';
import { Card, EmptyRow, Loading, Num, PageTitle, Yes } from '../ui.jsx';

const enc = encodeURIComponent;
// Which namespaces replicate changes rarely: found again this often, while
// their topics' figures are read on every poll.
const DISCOVER_MS = 15000;
const PARALLEL = 4;

export function Replication() {
  // Each visit discovers afresh, so a namespace just set to replicate shows.
  const discovered = useRef({ at: 0, namespaces: [] }).current;
  const { data } = usePoll(() => loadReplication(discovered), []);
  return (
    <>
      <PageTitle>Replication</PageTitle>
      <Loading data={data} />
      {data && <ClusterSummary rows={data.rows} />}
      {data && <ReplicatorTable rows={data.rows} namespaces={data.namespaces} />}
    </>
  );
}

async function loadReplication(discovered) {
  if (Date.now() - discovered.at > DISCOVER_MS) {
    discovered.namespaces = await replicatedNamespaces();
    discovered.at = Date.now();
  }
  const { namespaces } = discovered;
  const topicLists = await inBatches(namespaces, (ns) =>
    seen(getJSON(`namespaces/${ns.split('/').map(enc).join('/')}/topics`), []),
  );
  const rows = [];
  topicLists.forEach((topics, i) => {
    for (const t of topics) {
      for (const [cluster, r] of Object.entries(t.replication ?? {})) {
        rows.push({ namespace: namespaces[i], topic: t.name, cluster, ...r });
      }
    }
  });
  rows.sort((a, b) => a.topic.localeCompare(b.topic) || a.cluster.localeCompare(b.cluster));
  return { namespaces, rows };
}

// replicatedNamespaces lists "tenant/namespace" of every visible namespace
// replicated to more than one cluster. What this user may not see (403)
// or what went away meanwhile (404) is left out.
async function replicatedNamespaces() {
  const tenants = await getJSON('admin/v2/tenants');
  const perTenant = await inBatches(tenants, (t) => seen(getJSON(`admin/v2/namespaces/${enc(t)}`), []));
  const namespaces = perTenant.flat();
  const policies = await inBatches(namespaces, (ns) =>
    seen(getJSON(`admin/v2/namespaces/${ns.split('/').map(enc).join('/')}`), {}),
  );
  return namespaces.filter((_, i) => (policies[i].replication_clusters ?? []).length > 1).sort();
}

async function seen(promise, otherwise) {
  try {
    return await promise;
  } catch (err) {
    if (err.status === 403 || err.status === 404) return otherwise;
    throw err;
  }
}

// inBatches maps items to calls, PARALLEL at a time, keeping the order.
async function inBatches(items, fn) {
  const out = [];
  for (let i = 0; i < items.length; i += PARALLEL) {
    out.push(...(await Promise.all(items.slice(i, i + PARALLEL).map(fn))));
  }
  return out;
}

function ClusterSummary({ rows }) {
  const clusters = new Map();
  for (const r of rows) {
    const c = clusters.get(r.cluster) ?? { topics: 0, connected: 0, backlog: 0, delay: 0, rateOut: 0 };
    c.topics++;
    c.connected += r.connected ? 1 : 0;
    c.backlog += r.replicationBacklog ?? 0;
    c.delay = Math.max(c.delay, r.replicationDelayInSeconds ?? 0);
    c.rateOut += r.msgRateOut ?? 0;
    clusters.set(r.cluster, c);
  }
  const names = [...clusters.keys()].sort();
  return (
    <Card title="Remote clusters">
      <table>
        <thead>
          <tr>
            <th>Cluster</th>
            <th class="num">Topics</th>
            <th class="num">Connected</th>
            <th class="num">Rate out</th>
            <th class="num">Backlog</th>
            <th class="num">Largest delay</th>
          </tr>
        </thead>
        <tbody>
          {names.length === 0 && <EmptyRow cols={6}>Nothing replicates to another cluster.</EmptyRow>}
          {names.map((name) => {
            const c = clusters.get(name);
            return (
              <tr key={name} data-testid="replication-cluster" data-cluster={name}>
                <td>{name}</td>
                <Num testid="cluster-topics" value={c.topics} format={formatCount} />
                <Num testid="cluster-connected" value={c.connected} format={formatCount} />
                <Num testid="cluster-rate-out" value={c.rateOut} format={formatRate} />
                <Num testid="cluster-backlog" value={c.backlog} format={formatCount} />
                <Num testid="cluster-delay" value={c.delay} format={formatSeconds} />
              </tr>
            );
          })}
        </tbody>
      </table>
    </Card>
  );
}

function ReplicatorTable({ rows, namespaces }) {
  return (
    <Card title={`Replicated topics (namespaces: ${namespaces.join(', ') || 'none'})`}>
      <table>
        <thead>
          <tr>
            <th>Topic</th>
            <th>Remote cluster</th>
            <th>Connected</th>
            <th class="num">Rate out</th>
            <th class="num">Backlog</th>
            <th class="num">Delay</th>
          </tr>
        </thead>
        <tbody>
          {rows.length === 0 && <EmptyRow cols={6}>No replicated topics.</EmptyRow>}
          {rows.map((r) => (
            <tr key={`${r.topic} ${r.cluster}`} data-testid="replication-row" data-cluster={r.cluster} data-topic={r.topic}>
              <td>
                <a href={links.topic(r.topic)}>{r.topic}</a>
              </td>
              <td>{r.cluster}</td>
              <td data-testid="repl-connected" data-value={String(!!r.connected)}>
                <Yes value={r.connected} />
              </td>
              <Num testid="repl-rate-out" value={r.msgRateOut} format={formatRate} />
              <Num testid="repl-backlog" value={r.replicationBacklog} format={formatCount} />
              <Num testid="repl-delay" value={r.replicationDelayInSeconds} format={formatSeconds} />
            </tr>
          ))}
        </tbody>
      </table>
    </Card>
  );
}
