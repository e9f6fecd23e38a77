// A topic's subscriptions with their consumers, and the actions on a
// subscription's cursor. Every action changes what the subscription will
// receive, so each asks in the page first; only one question is open at
// a time, and its answer shows in action-result.
import { useState } from 'preact/hooks';
import { call } from '../api.js';
import { formatBytes, formatCount, formatRate } from '../format.js';
import { reportError } from '../state.js';
import { Card, EmptyRow, Num, Yes } from '../ui.jsx';

const enc = encodeURIComponent;
const COLS = 8;

export function Subscriptions({ base, subscriptions, readOnly, onDone }) {
  const [pending, setPending] = useState(null); // {sub, question, perform}
  const [result, setResult] = useState(null); // {text, detail}
  const names = Object.keys(subscriptions ?? {}).sort();

  const ask = (sub, question, perform) => {
    setResult(null);
    setPending({ sub, question, perform });
  };
  const answer = async (yes) => {
    const action = pending;
    setPending(null);
    if (!yes) return;
    try {
      await action.perform();
      setResult({ text: 'done', detail: action.question.replace(/\?$/, '') });
      onDone();
    } catch (err) {
      reportError(err);
      setResult({ text: 'failed', detail: err.message });
    }
  };

  const outcome = result && (
    <span class={`result ${result.text}`}>
      <b data-testid="action-result">{result.text}</b> <span class="muted">{result.detail}</span>
    </span>
  );
  return (
    <Card title={`Subscriptions (${names.length})`} extra={outcome}>
      <table class="subs">
        <thead>
          <tr>
            <th>Subscription</th>
            <th>Type</th>
            <th class="num">Backlog</th>
            <th class="num">Backlog size</th>
            <th class="num">Unacked</th>
            <th class="num">Delayed</th>
            <th class="num">Rate out</th>
            <th class="num">Consumers</th>
          </tr>
        </thead>
        {names.length === 0 && (
          <tbody>
            <EmptyRow cols={COLS}>No subscriptions.</EmptyRow>
          </tbody>
        )}
        {names.map((name) => (
          <SubscriptionRow
            key={name}
            name={name}
            sub={subscriptions[name]}
            path={`${base}/subscription/${enc(name)}`}
            readOnly={readOnly}
            ask={ask}
            pending={pending?.sub === name ? pending : null}
            answer={answer}
          />
        ))}
      </table>
    </Card>
  );
}

// SubscriptionRow is a row group: the figures, the consumers and the
// actions, all inside the element tests find by data-sub.
function SubscriptionRow({ name, sub, path, readOnly, ask, pending, answer }) {
  const consumers = sub.consumers ?? [];
  return (
    <tbody data-testid="subscription-row" data-sub={name}>
      <tr>
        <td>
          <b>{name}</b>
          {sub.isReplicated && <span class="badge">replicated</span>}
          {!sub.isDurable && <span class="badge">non-durable</span>}
        </td>
        <td>{sub.type}</td>
        <Num testid="sub-backlog" value={sub.msgBacklog} format={formatCount} />
        <Num testid="sub-backlog-size" value={sub.backlogSize} format={formatBytes} />
        <Num testid="sub-unacked" value={sub.unackedMessages} format={formatCount} />
        <Num testid="sub-delayed" value={sub.msgDelayed} format={formatCount} />
        <Num testid="sub-rate-out" value={sub.msgRateOut} format={formatRate} />
        <Num testid="sub-consumers" value={consumers.length} format={formatCount} />
      </tr>
      {consumers.length > 0 && (
        <tr class="nested">
          <td colSpan={COLS}>
            <Consumers consumers={consumers} active={sub.activeConsumerName} />
          </td>
        </tr>
      )}
      {!readOnly && (
        <tr class="nested">
          <td colSpan={COLS}>
            <Actions name={name} path={path} ask={ask} />
            {pending && <Confirm question={pending.question} answer={answer} />}
          </td>
        </tr>
      )}
    </tbody>
  );
}

function Consumers({ consumers, active }) {
  return (
    <table class="inner">
      <thead>
        <tr>
          <th>Consumer</th>
          <th>Address</th>
          <th class="num">Permits</th>
          <th class="num">Unacked</th>
          <th class="num">Rate out</th>
          <th>Blocked</th>
          <th>Client</th>
          <th>Connected since</th>
        </tr>
      </thead>
      <tbody>
        {consumers.map((c, i) => (
          <tr key={i} data-testid="consumer-row" data-consumer={c.consumerName}>
            <td>
              {c.consumerName}
              {active && active === c.consumerName && <span class="badge">active</span>}
            </td>
            <td>{c.address}</td>
            <Num value={c.availablePermits} format={formatCount} />
            <Num value={c.unackedMessages} format={formatCount} />
            <Num value={c.msgRateOut} format={formatRate} />
            <td>
              <Yes value={!c.blockedConsumerOnUnackedMsgs} yes="no" no="blocked" />
            </td>
            <td>{c.clientVersion}</td>
            <td>{c.connectedSince}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function Actions({ name, path, ask }) {
  const [skip, setSkip] = useState('1');
  const [minutes, setMinutes] = useState('10');
  const [ledger, setLedger] = useState('');
  const [entry, setEntry] = useState('');
  // act asks the question only when the inputs make sense.
  const act = (problem, question, perform) => () =>
    problem ? reportError(new Error(problem)) : ask(name, question, perform);

  const skipSome = act(
    !isWhole(skip) && 'The number of messages to skip must be a whole number.',
    `Skip ${skip} messages of ${name}?`,
    () => call('POST', `${path}/skip/${skip.trim()}`),
  );
  const clearBacklog = act(null, `Clear the whole backlog of ${name}?`, () => call('POST', `${path}/skip_all`));
  const resetToTime = act(
    !(minutes.trim() !== '' && Number(minutes) >= 0) && 'Minutes ago must be a number, 0 or more.',
    `Reset ${name} to ${minutes} minutes ago?`,
    // The time is taken when confirmed, not when asked.
    () => call('POST', `${path}/resetcursor/${Math.round(Date.now() - Number(minutes) * 60000)}`),
  );
  const resetToMessage = act(
    !(isWhole(ledger) && isWhole(entry)) && 'Ledger and entry must be whole numbers.',
    `Reset ${name} to message ${ledger}:${entry}?`,
    () => call('POST', `${path}/resetcursor`, { ledgerId: Number(ledger), entryId: Number(entry) }),
  );
  const unsubscribe = act(null, `Delete the subscription ${name}?`, () => call('DELETE', path));

  return (
    <div class="actions">
      <span class="group">
        <Field testid="skip-count" type="number" value={skip} set={setSkip} />
        <Action testid="action-skip" onClick={skipSome}>Skip</Action>
      </span>
      <Action testid="action-clear-backlog" onClick={clearBacklog}>Clear backlog</Action>
      <span class="group">
        <Field testid="reset-minutes" type="number" value={minutes} set={setMinutes} />
        <Action testid="action-reset-time" onClick={resetToTime}>Reset to minutes ago</Action>
      </span>
      <span class="group">
        <Field testid="reset-ledger" placeholder="ledger" value={ledger} set={setLedger} />
        <Field testid="reset-entry" placeholder="entry" value={entry} set={setEntry} />
        <Action testid="action-reset-id" onClick={resetToMessage}>Reset to message</Action>
      </span>
      <Action testid="action-unsubscribe" onClick={unsubscribe} danger>
        Unsubscribe
      </Action>
    </div>
  );
}

const isWhole = (text) => /^\d+$/.test(text.trim());

function Field({ testid, set, ...rest }) {
  return <input data-testid={testid} min="0" onInput={(e) => set(e.target.value)} {...rest} />;
}

function Action({ testid, onClick, danger, children }) {
  return (
    <button type="button" class={danger ? 'danger' : ''} data-testid={testid} onClick={onClick}>
      {children}
    </button>
  );
}

function Confirm({ question, answer }) {
  return (
    <div class="confirm" role="alertdialog">
      {question}{' '}
      <button type="button" class="danger" data-testid="confirm-yes" onClick={() => answer(true)}>
        Yes
      </button>
      <button type="button" data-testid="confirm-no" onClick={() => answer(false)}>
        No
      </button>
    </div>
  );
}
