// The bookies: whether each takes writes, and how full its disks are.
import { getJSON } from '../api.js';
import { formatBytes, formatPercent } from '../format.js';
import { usePoll } from '../poll.js';
import { Card, EmptyRow, Loading, PageTitle } from '../ui.jsx';

export function Bookies() {
  const { data } = usePoll(() => getJSON('bookies'), []);
  return (
    <>
      <PageTitle>Bookies</PageTitle>
      <Card>
        <Loading data={data} />
        {data && <BookieTable bookies={data} />}
      </Card>
    </>
  );
}

export function bookieState(b) {
  if (!b.reachable) return 'unreachable';
  return b.readOnly ? 'read-only' : 'writable';
}

// usage is the fullest directory of one kind (journal or ledger), with
// every such directory named in the tooltip.
function usage(dirs, journal) {
  const mine = (dirs ?? []).filter((d) => !!d.journal === journal);
  if (!mine.length) return { value: undefined, title: '' };
  return {
    value: Math.max(...mine.map((d) => d.usedPercent)),
    title: mine.map((d) => `${d.dir}: ${formatPercent(d.usedPercent)}`).join('\n'),
  };
}

function Usage({ testid, dirs, journal }) {
  const { value, title } = usage(dirs, journal);
  return (
    <td class="num" data-testid={testid} data-value={value ?? ''} title={title}>
      {value === undefined ? '—' : formatPercent(value)}
    </td>
  );
}

export function BookieTable({ bookies }) {
  return (
    <table>
      <thead>
        <tr>
          <th>Bookie</th>
          <th>State</th>
          <th>Reason</th>
          <th class="num">Journal used</th>
          <th class="num">Ledgers used</th>
          <th class="num">Free</th>
          <th class="num">Total</th>
        </tr>
      </thead>
      <tbody>
        {bookies.length === 0 && <EmptyRow cols={7}>No bookies registered.</EmptyRow>}
        {bookies.map((b) => (
          <tr key={b.id} data-testid="bookie-row" data-bookie={b.id}>
            <td>{b.id}</td>
            <td>
              <span data-testid="bookie-state" class={`state ${bookieState(b)}`}>
                {bookieState(b)}
              </span>
              {b.outOfSpace && <span class="badge warn">out of space</span>}
            </td>
            <td data-testid="bookie-reason">{b.reason}</td>
            <Usage testid="bookie-journal-usage" dirs={b.dirs} journal />
            <Usage testid="bookie-ledger-usage" dirs={b.dirs} journal={false} />
            <td class="num" data-value={b.freeBytes}>{formatBytes(b.freeBytes)}</td>
            <td class="num" data-value={b.totalBytes}>{formatBytes(b.totalBytes)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
