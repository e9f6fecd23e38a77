// One namespace: its policies and its topics, sortable.
import { useState } from 'preact/hooks';
import { getJSON } from '../api.js';
import { formatBytes, formatCount, formatRate, formatThroughput } from '../format.js';
import { usePoll } from '../poll.js';
import { followRowLink, links, topicParts } from '../router.js';
import { Card, EmptyRow, Loading, Num, PageTitle } from '../ui.jsx';

const enc = encodeURIComponent;

// The sort keys: numbers largest first, names A to Z; a second click on
// the same header reverses the order.
const sorts = {
  name: { by: (t) => t.name, descending: false },
  rate: { by: (t) => t.msgRateIn, descending: true },
  backlog: { by: (t) => t.backlog, descending: true },
  storage: { by: (t) => t.storageSize, descending: true },
};

export function sortTopics(topics, key, reversed) {
  const { by, descending } = sorts[key];
  const sign = descending !== reversed ? -1 : 1;
  return [...topics].sort((a, b) => {
    const x = by(a);
    const y = by(b);
    const order = typeof x === 'string' ? x.localeCompare(y) : x - y;
    return sign * order || a.name.localeCompare(b.name);
  });
}

export function Namespace({ tenant, namespace }) {
  const path = `${enc(tenant)}/${enc(namespace)}`;
  const { data } = usePoll(async () => {
    const [policies, topics] = await Promise.all([
      getJSON(`admin/v2/namespaces/${path}`),
      getJSON(`namespaces/${path}/topics`),
    ]);
    return { policies, topics };
  }, [tenant, namespace]);
  return (
    <>
      <PageTitle crumbs={[['Tenants', '#/tenants'], [tenant, links.tenant(tenant)]]}>
        {tenant}/{namespace}
      </PageTitle>
      <Loading data={data} />
      {data && <TopicsTable topics={data.topics} />}
      {data && (
        <Card title="Policies">
          <pre class="json" data-testid="policies">
            {JSON.stringify(data.policies, null, 2)}
          </pre>
        </Card>
      )}
    </>
  );
}

function TopicsTable({ topics }) {
  const [sort, setSort] = useState({ key: 'name', reversed: false });
  const choose = (key) => setSort((s) => ({ key, reversed: s.key === key ? !s.reversed : false }));
  return (
    <Card title={`Topics (${topics.length})`}>
      <table data-testid="topics-table" data-sort={sort.key} data-reversed={sort.reversed}>
        <thead>
          <tr>
            <th>
              <SortButton sort={sort} onSort={choose} id="name">Topic</SortButton>
            </th>
            <th class="num">Partitions</th>
            <th class="num">
              <SortButton sort={sort} onSort={choose} id="rate">Rate in</SortButton>
            </th>
            <th class="num">Rate out</th>
            <th class="num">Throughput in</th>
            <th class="num">Throughput out</th>
            <th class="num">
              <SortButton sort={sort} onSort={choose} id="backlog">Backlog</SortButton>
            </th>
            <th class="num">
              <SortButton sort={sort} onSort={choose} id="storage">Storage</SortButton>
            </th>
            <th class="num">Producers</th>
            <th class="num">Subs</th>
            <th class="num">Consumers</th>
          </tr>
        </thead>
        <tbody>
          {topics.length === 0 && <EmptyRow cols={11}>No topics.</EmptyRow>}
          {sortTopics(topics, sort.key, sort.reversed).map((t) => (
            <TopicRow key={t.name} topic={t} />
          ))}
        </tbody>
      </table>
    </Card>
  );
}

function SortButton({ id, sort, onSort, children }) {
  const arrow = sorts[id].descending !== sort.reversed ? ' ▼' : ' ▲';
  return (
    <button type="button" class="sort" data-testid={`sort-${id}`} onClick={() => onSort(id)}>
      {children}
      {sort.key === id ? arrow : ''}
    </button>
  );
}

function TopicRow({ topic: t }) {
  const href = links.topic(t.name);
  return (
    <tr data-testid="topic-row" data-topic={t.name} class={t.loaded ? '' : 'unloaded'} onClick={followRowLink(href)}>
      <td data-testid="topic-name" data-value={t.name} title={t.name}>
        {/* The page names the namespace: the row needs only the rest. */}
        <a href={href}>{topicParts(t.name).topic}</a>
        {t.name.startsWith('non-persistent:') && <span class="badge">non-persistent</span>}
        {!t.loaded && <span class="badge" title="no broker has it open; its figures are zero">not loaded</span>}
      </td>
      <Num testid="topic-partitions" value={t.partitions} format={formatCount} />
      <Num testid="topic-rate-in" value={t.msgRateIn} format={formatRate} />
      <Num testid="topic-rate-out" value={t.msgRateOut} format={formatRate} />
      <Num testid="topic-throughput-in" value={t.msgThroughputIn} format={formatThroughput} />
      <Num testid="topic-throughput-out" value={t.msgThroughputOut} format={formatThroughput} />
      <Num testid="topic-backlog" value={t.backlog} format={formatCount} />
      <Num testid="topic-storage" value={t.storageSize} format={formatBytes} />
      <Num testid="topic-producers" value={t.producers} format={formatCount} />
      <Num testid="topic-subscriptions" value={t.subscriptions} format={formatCount} />
      <Num testid="topic-consumers" value={t.consumers} format={formatCount} />
    </tr>
  );
}
