// Look at a topic's messages without consuming them: the first n a
// subscription has not acknowledged (peek), or the n first or last
// stored (examine). Payloads are shown per the topic's schema.
import { useState } from 'preact/hooks';
import { getJSON, send } from '../api.js';
import { messagesOf, renderPayload } from '../message.js';
import { adminTopicPath } from '../router.js';
import { reportError } from '../state.js';
import { Card, EmptyRow } from '../ui.jsx';

const enc = encodeURIComponent;
const MAX_COUNT = 100;
// Examine options' values; a subscription's name is the value of its own.
const EARLIEST = '@earliest';
const LATEST = '@latest';

export function Peek({ name, partitions, subscriptions, schema }) {
  const subs = Object.keys(subscriptions ?? {}).sort();
  const [chosen, setChosen] = useState('');
  const [count, setCount] = useState('1');
  const [partition, setPartition] = useState('0');
  const [messages, setMessages] = useState(null);
  const [busy, setBusy] = useState(false);
  const from = chosen && (chosen.startsWith('@') || subs.includes(chosen)) ? chosen : subs[0] ?? EARLIEST;

  const run = async () => {
    const n = Math.min(Math.max(parseInt(count, 10) || 1, 1), MAX_COUNT);
    const topic = partitions > 0 ? { ...name, topic: `${name.topic}-partition-${partition}` } : name;
    setBusy(true);
    try {
      setMessages(await readMessages(adminTopicPath(topic), from, n));
    } catch (err) {
      reportError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <Card title="Messages">
      <div class="toolbar">
        {partitions > 0 && (
          <label>
            Partition{' '}
            <select data-testid="peek-partition" value={partition} onChange={(e) => setPartition(e.target.value)}>
              {Array.from({ length: partitions }, (_, i) => (
                <option key={i} value={i}>
                  {i}
                </option>
              ))}
            </select>
          </label>
        )}
        <label>
          From{' '}
          <select data-testid="peek-sub" value={from} onChange={(e) => setChosen(e.target.value)}>
            {subs.length > 0 && (
              <optgroup label="Peek: not yet acknowledged by">
                {subs.map((s) => (
                  <option key={s} value={s}>
                    {s}
                  </option>
                ))}
              </optgroup>
            )}
            <optgroup label="Examine: stored">
              <option value={EARLIEST}>earliest first</option>
              <option value={LATEST}>latest first</option>
            </optgroup>
          </select>
        </label>
        <label>
          Count{' '}
          <input data-testid="peek-count" type="number" min="1" max={MAX_COUNT} value={count} onInput={(e) => setCount(e.target.value)} />
        </label>
        <button type="button" data-testid="peek-button" onClick={run} disabled={busy}>
          {busy ? 'Reading…' : 'Show messages'}
        </button>
      </div>
      {messages && <Messages messages={messages} schema={schema} />}
    </Card>
  );
}

// readMessages reads at most n entries, no more than are there: a peek
// asks the subscription's backlog first and an examine the stored entry
// count, so that the normal case never meets a 404.
async function readMessages(path, from, n) {
  const examine = from.startsWith('@');
  const available = await (examine ? storedEntries(path) : backlogOf(path, from));
  const out = [];
  for (let i = 1; i <= Math.min(n, available); i++) {
    const url = examine
      ? `${path}/examinemessage?initialPosition=${from.slice(1)}&messagePosition=${i}`
      : `${path}/subscription/${enc(from)}/position/${i}`;
    let res;
    try {
      res = await send(url);
    } catch (err) {
      if (err.status === 404) break; // acknowledged or trimmed meanwhile
      throw err;
    }
    const headers = Object.fromEntries(res.headers);
    out.push(...messagesOf(headers, new Uint8Array(await res.arrayBuffer())));
  }
  return out;
}

async function backlogOf(path, sub) {
  const stats = await getJSON(`${path}/stats`);
  return stats.subscriptions?.[sub]?.msgBacklog ?? 0;
}

async function storedEntries(path) {
  try {
    return (await getJSON(`${path}/internalStats`)).numberOfEntries ?? MAX_COUNT;
  } catch (err) {
    if (err.status === 0 || err.status === 401) throw err;
    return MAX_COUNT; // no count to go by: read until the first 404
  }
}

function Messages({ messages, schema }) {
  return (
    <table class="messages">
      <thead>
        <tr>
          <th>Message</th>
          <th>Published</th>
          <th>Key</th>
          <th>Properties</th>
          <th>Payload</th>
        </tr>
      </thead>
      <tbody>
        {messages.length === 0 && <EmptyRow cols={5}>No messages.</EmptyRow>}
        {messages.map((m) => (
          <tr key={m.id} data-testid="message-row" data-message-id={m.id}>
            <td>
              <span data-testid="message-id">{m.id}</span>
              <div class="muted small">
                {m.producer} #{m.sequenceId}
                {m.eventTime && <div>event {m.eventTime}</div>}
              </div>
            </td>
            <td data-testid="message-publish-time">{m.publishTime}</td>
            <td data-testid="message-key">{m.key}</td>
            <td data-testid="message-properties">
              {Object.entries(m.properties).map(([k, v]) => (
                <div key={k}>
                  {k}={v}
                </div>
              ))}
            </td>
            <td>
              <pre class="payload" data-testid="message-payload">
                {renderPayload(m.payload, schema)}
              </pre>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
