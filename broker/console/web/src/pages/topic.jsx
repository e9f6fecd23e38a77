// One topic: its figures, live charts, producers, subscriptions,
// replication, schema and messages. A partitioned topic is shown as the
// sum of its partitions, as the admin API's partitioned-stats sums them.
import { useEffect, useState } from 'preact/hooks';
import { getJSON } from '../api.js';
import { TimeChart } from '../charts.jsx';
import { formatBytes, formatCount, formatRate, formatSeconds, formatThroughput, formatTime } from '../format.js';
import { usePoll } from '../poll.js';
import { adminTopicPath, links } from '../router.js';
import { reportError, session, useStore } from '../state.js';
import { Card, EmptyRow, Loading, Num, PageTitle, Stat, Yes } from '../ui.jsx';
import { Peek } from './peek.jsx';
import { Subscriptions } from './subscriptions.jsx';

const enc = encodeURIComponent;

// name: {domain, tenant, namespace, topic}.
export function Topic({ name }) {
  const { readOnly } = useStore(session);
  const base = adminTopicPath(name);
  const full = `${name.domain}://${name.tenant}/${name.namespace}/${name.topic}`;
  const { data, reload } = usePoll(() => loadTopic(name, base), [base]);
  const schema = useSchema(name);
  const stats = data?.stats;
  return (
    <>
      <PageTitle
        testid="topic-title"
        crumbs={[
          ['Tenants', '#/tenants'],
          [name.tenant, links.tenant(name.tenant)],
          [name.namespace, links.namespace(`${name.tenant}/${name.namespace}`)],
        ]}
      >
        {full}
      </PageTitle>
      {data?.partitions > 0 && <p class="muted">Partitioned: {data.partitions} partitions, shown summed.</p>}
      <Loading data={data} />
      {stats && <TopicStats stats={stats} />}
      {data && <Charts samples={data.history.samples ?? []} />}
      {stats && <Producers publishers={stats.publishers ?? []} />}
      {stats && (
        <Subscriptions key={base} base={base} subscriptions={stats.subscriptions} readOnly={readOnly} onDone={reload} />
      )}
      {stats && <Replication replication={stats.replication ?? {}} />}
      <SchemaCard schema={schema} />
      {stats && name.domain === 'persistent' && (
        <Peek key={base} name={name} partitions={data.partitions} subscriptions={stats.subscriptions} schema={schema} />
      )}
    </>
  );
}

async function loadTopic(name, base) {
  const [{ partitions }, history] = await Promise.all([
    getJSON(`${base}/partitions`),
    getJSON(`history/${[name.domain, name.tenant, name.namespace, name.topic].map(enc).join('/')}`),
  ]);
  const stats = await getJSON(partitions > 0 ? `${base}/partitioned-stats?perPartition=false` : `${base}/stats`);
  return { partitions, stats, history };
}

// useSchema loads the topic's schema once: undefined while loading, null
// for none. It asks for the list of versions (empty when there is none)
// rather than the latest, whose 404 for "none" the browser would log as
// an error on every schemaless topic.
function useSchema(name) {
  const [schema, setSchema] = useState();
  // Partitions share their topic's schema.
  const topic = name.topic.replace(/-partition-\d+$/, '');
  const path = `admin/v2/schemas/${enc(name.tenant)}/${enc(name.namespace)}/${enc(topic)}/schemas`;
  useEffect(() => {
    let current = true;
    setSchema(undefined);
    getJSON(path)
      .then((all) => current && setSchema(all.getSchemaResponses?.at(-1) ?? null))
      .catch((err) => {
        if (!current) return;
        setSchema(null);
        reportError(err);
      });
    return () => {
      current = false;
    };
  }, [path]);
  return schema;
}

function TopicStats({ stats: s }) {
  const backlog = Object.values(s.subscriptions ?? {}).reduce((sum, sub) => sum + (sub.msgBacklog ?? 0), 0);
  return (
    <div class="stats" data-testid="topic-stats">
      <Stat testid="stat-rate-in" label="Rate in" value={s.msgRateIn} format={formatRate} />
      <Stat testid="stat-rate-out" label="Rate out" value={s.msgRateOut} format={formatRate} />
      <Stat testid="stat-throughput-in" label="Throughput in" value={s.msgThroughputIn} format={formatThroughput} />
      <Stat testid="stat-throughput-out" label="Throughput out" value={s.msgThroughputOut} format={formatThroughput} />
      <Stat testid="stat-storage" label="Storage" value={s.storageSize} format={formatBytes} />
      <Stat testid="stat-backlog" label="Backlog (all subscriptions)" value={backlog} format={formatCount} />
      <Stat testid="stat-backlog-size" label="Backlog size" value={s.backlogSize} format={formatBytes} />
      <Stat testid="stat-msg-in" label="Messages in" value={s.msgInCounter} format={formatCount} />
      <Stat testid="stat-msg-out" label="Messages out" value={s.msgOutCounter} format={formatCount} />
      <Stat testid="stat-avg-size" label="Average size" value={s.averageMsgSize} format={formatBytes} />
      <Stat testid="stat-created" label="Created" value={s.topicCreationTimeStamp} format={formatTime} small />
      <Stat testid="stat-last-publish" label="Last publish" value={s.lastPublishTimeStamp} format={formatTime} small />
    </div>
  );
}

const rateLines = [
  { label: 'In', value: (s) => s.msgRateIn, format: formatRate },
  { label: 'Out', value: (s) => s.msgRateOut, format: formatRate },
];
const backlogLines = [{ label: 'Backlog', value: (s) => s.backlog, format: formatCount }];

function Charts({ samples }) {
  return (
    <div class="charts">
      <TimeChart testid="chart-rate" title="Messages per second" samples={samples} lines={rateLines} />
      <TimeChart testid="chart-backlog" title="Backlog of the slowest durable subscription" samples={samples} lines={backlogLines} />
    </div>
  );
}

function Producers({ publishers }) {
  return (
    <Card title={`Producers (${publishers.length})`}>
      <table>
        <thead>
          <tr>
            <th>Producer</th>
            <th class="num">Id</th>
            <th>Access</th>
            <th>Address</th>
            <th class="num">Rate in</th>
            <th>Client</th>
            <th>Connected since</th>
          </tr>
        </thead>
        <tbody>
          {publishers.length === 0 && <EmptyRow cols={7}>No producers.</EmptyRow>}
          {publishers.map((p) => (
            <tr key={`${p.address}/${p.producerId}`} data-testid="producer-row" data-producer={p.producerName}>
              <td>{p.producerName}</td>
              <td class="num">{p.producerId}</td>
              <td>{p.accessMode}</td>
              <td>{p.address}</td>
              <Num value={p.msgRateIn} format={formatRate} />
              <td>{p.clientVersion}</td>
              <td>{p.connectedSince}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </Card>
  );
}

function Replication({ replication }) {
  const clusters = Object.keys(replication).sort();
  return (
    <Card title="Replication">
      <table>
        <thead>
          <tr>
            <th>Remote cluster</th>
            <th>Connected</th>
            <th class="num">Rate out</th>
            <th class="num">Rate in</th>
            <th class="num">Throughput out</th>
            <th class="num">Backlog</th>
            <th class="num">Delay</th>
          </tr>
        </thead>
        <tbody>
          {clusters.length === 0 && <EmptyRow cols={7}>Not replicated.</EmptyRow>}
          {clusters.map((c) => {
            const r = replication[c];
            return (
              <tr key={c} data-testid="replication-row" data-cluster={c}>
                <td>{c}</td>
                <td data-testid="repl-connected" data-value={String(!!r.connected)}>
                  <Yes value={r.connected} />
                </td>
                <Num testid="repl-rate-out" value={r.msgRateOut} format={formatRate} />
                <Num testid="repl-rate-in" value={r.msgRateIn} format={formatRate} />
                <Num testid="repl-throughput-out" value={r.msgThroughputOut} format={formatThroughput} />
                <Num testid="repl-backlog" value={r.replicationBacklog} format={formatCount} />
                <Num testid="repl-delay" value={r.replicationDelayInSeconds} format={formatSeconds} />
              </tr>
            );
          })}
        </tbody>
      </table>
    </Card>
  );
}

function SchemaCard({ schema }) {
  return (
    <Card title="Schema">
      <div data-testid="schema">
        {schema === undefined && <p class="muted">Loading…</p>}
        {schema === null && <p>no schema</p>}
        {schema && (
          <>
            <p>
              <b>{schema.type}</b> <span class="muted">version {schema.version}</span>
            </p>
            {schema.data && <pre class="json">{prettyDefinition(schema.data)}</pre>}
          </>
        )}
      </div>
    </Card>
  );
}

function prettyDefinition(data) {
  try {
    return JSON.stringify(JSON.parse(data), null, 2);
  } catch {
    return data;
  }
}
