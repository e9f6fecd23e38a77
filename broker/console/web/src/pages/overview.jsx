// The cluster at a glance: totals, alerts, brokers and bookies.
import { getJSON } from '../api.js';
import { formatBytes, formatCount, formatRate, formatThroughput } from '../format.js';
import { usePoll } from '../poll.js';
import { Card, EmptyRow, Num, PageTitle, Stat, Yes } from '../ui.jsx';
import { BookieTable } from './bookies.jsx';

export function Overview() {
  const { data } = usePoll(() => getJSON('overview'), []);
  const t = data?.totals ?? {};
  return (
    <>
      <PageTitle>Overview{data?.cluster ? ` — ${data.cluster}` : ''}</PageTitle>
      <div class="stats">
        <Stat testid="stat-brokers" label="Brokers" value={t.brokers} format={formatCount} />
        <Stat testid="stat-bookies" label="Bookies" value={t.bookies} format={formatCount} />
        <Stat testid="stat-writable-bookies" label="Writable bookies" value={t.writableBookies} format={formatCount} />
        <Stat testid="stat-bundles" label="Bundles" value={t.bundles} format={formatCount} />
        <Stat testid="stat-topics" label="Topics" value={t.topics} format={formatCount} />
        <Stat testid="stat-rate-in" label="Rate in" value={t.msgRateIn} format={formatRate} />
        <Stat testid="stat-rate-out" label="Rate out" value={t.msgRateOut} format={formatRate} />
        <Stat testid="stat-throughput-in" label="Throughput in" value={t.msgThroughputIn} format={formatThroughput} />
        <Stat testid="stat-throughput-out" label="Throughput out" value={t.msgThroughputOut} format={formatThroughput} />
        <Stat testid="stat-storage" label="Storage" value={t.storageSize} format={formatBytes} />
        <Stat testid="stat-backlog" label="Backlog" value={t.backlog} format={formatCount} />
      </div>
      {data && <Alerts alerts={data.alerts ?? []} />}
      {data && <Brokers brokers={data.brokers ?? []} />}
      {data && (
        <Card title="Bookies">
          <BookieTable bookies={data.bookies ?? []} />
        </Card>
      )}
    </>
  );
}

function Alerts({ alerts }) {
  return (
    <Card title="Alerts">
      <table>
        <tbody>
          {alerts.length === 0 && <EmptyRow cols={3}>No alerts.</EmptyRow>}
          {alerts.map((a, i) => (
            <tr key={i} data-testid="alert-row" class={`alert ${a.severity}`}>
              <td class="severity">{a.severity}</td>
              <td>{a.name}</td>
              <td>{a.summary}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </Card>
  );
}

function Brokers({ brokers }) {
  return (
    <Card title="Brokers">
      <table>
        <thead>
          <tr>
            <th>Broker</th>
            <th>Reachable</th>
            <th class="num">Topics</th>
            <th class="num">Bundles</th>
            <th class="num">Rate in</th>
            <th class="num">Rate out</th>
            <th class="num">Throughput in</th>
            <th class="num">Throughput out</th>
            <th class="num">Storage</th>
            <th class="num">Backlog</th>
          </tr>
        </thead>
        <tbody>
          {brokers.map((b) => (
            <tr key={b.url} data-testid="broker-row" data-broker={b.url}>
              <td>{b.url}</td>
              <td title={b.error}>
                <Yes value={b.reachable} no={b.error ? `no: ${b.error}` : 'no'} />
              </td>
              <Num value={b.topics} format={formatCount} />
              <Num value={b.bundles} format={formatCount} />
              <Num value={b.msgRateIn} format={formatRate} />
              <Num value={b.msgRateOut} format={formatRate} />
              <Num value={b.msgThroughputIn} format={formatThroughput} />
              <Num value={b.msgThroughputOut} format={formatThroughput} />
              <Num value={b.storageSize} format={formatBytes} />
              <Num value={b.backlog} format={formatCount} />
            </tr>
          ))}
        </tbody>
      </table>
    </Card>
  );
}
