// A stand-in broker for working on the console without one: it serves
// ../dist under /console/ and canned answers for the /console/api calls.
//
//   npm run build && node dev/mock.mjs            # http://127.0.0.1:8099/console/
//   MOCK_AUTH=1 node dev/mock.mjs                 # token "secret" or admin/admin
//   MOCK_READONLY=1 node dev/mock.mjs             # consoleReadOnly
//
// Killing and restarting it is how to try the console's reconnecting.
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { extname, join } from 'node:path';

const PORT = Number(process.env.PORT ?? 8099);
const AUTH = !!process.env.MOCK_AUTH;
const READ_ONLY = !!process.env.MOCK_READONLY;
const DIST = new URL('../../dist/', import.meta.url).pathname;
const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css' };

const ORDER_SCHEMA = {
  type: 'record', name: 'Order', fields: [
    { name: 'id', type: 'long' }, { name: 'item', type: 'string' }, { name: 'note', type: ['null', 'string'] },
  ],
};
const schemas = {
  orders: { version: 0, type: 'AVRO', timestamp: 0, data: JSON.stringify(ORDER_SCHEMA), properties: {} },
  events: { version: 1, type: 'JSON', timestamp: 0, data: JSON.stringify(ORDER_SCHEMA), properties: {} },
};

const zigzag = (n) => {
  const out = [];
  for (let z = n >= 0 ? n * 2 : -n * 2 - 1; ; z = Math.floor(z / 128)) {
    if (z < 128) return [...out, z];
    out.push((z % 128) | 128);
  }
};
const avroString = (s) => [...zigzag(Buffer.byteLength(s)), ...Buffer.from(s)];
const orderAvro = (id) => Buffer.from([...zigzag(id), ...avroString(`widget-${id}`), ...zigzag(1), ...avroString('gift')]);

function topicRow(name, backlog, extra = {}) {
  return { name, partitions: 0, msgRateIn: backlog / 7, msgRateOut: 1.25, msgThroughputIn: backlog * 100,
    msgThroughputOut: 300, backlog, storageSize: backlog * 4096, producers: 1, subscriptions: 2, consumers: 1,
    loaded: true, ...extra };
}
const replication = { c2: { connected: true, msgRateOut: 2.5, replicationBacklog: 12, replicationDelayInSeconds: 3 } };
const topics = {
  'public/default': [topicRow('persistent://public/default/orders', 17), topicRow('persistent://public/default/events', 3),
    topicRow('persistent://public/default/big', 120000, { partitions: 4 }), topicRow('persistent://public/default/idle', 0, { loaded: false })],
  'acme/geo': [topicRow('persistent://acme/geo/mirror', 5, { replication })],
};
const bookies = [
  { id: '127.0.0.1:3181', readOnly: false, reason: '', outOfSpace: false, reachable: true, freeBytes: 5e10, totalBytes: 1e11,
    dirs: [{ dir: '/data/journal', journal: true, usedPercent: 41.5 }, { dir: '/data/ledgers', journal: false, usedPercent: 50 }] },
  { id: '127.0.0.1:3182', readOnly: true, reason: 'disk full', outOfSpace: true, reachable: true, freeBytes: 1e8, totalBytes: 1e11,
    dirs: [{ dir: '/data/journal', journal: true, usedPercent: 97.2 }, { dir: '/data/ledgers', journal: false, usedPercent: 99.9 }] },
];
const subscriptions = {
  'billing': { type: 'Shared', isDurable: true, msgBacklog: 17, backlogSize: 17408, unackedMessages: 2, msgDelayed: 0, msgRateOut: 1.25,
    consumers: [{ consumerName: 'c-1', availablePermits: 998, unackedMessages: 2, address: '/127.0.0.1:50123', msgRateOut: 1.25,
      clientVersion: 'Pulsar-Go-version-0.14', connectedSince: '2025-12-04T10:00:00Z' }] },
  'audit': { type: 'Exclusive', isDurable: true, msgBacklog: 3, backlogSize: 3072, unackedMessages: 0, msgDelayed: 0, msgRateOut: 0, consumers: [] },
};
function stats(topic) {
  return { msgRateIn: 2.43, msgRateOut: 1.25, msgThroughputIn: 2430, msgThroughputOut: 1250, averageMsgSize: 1000,
    msgInCounter: 12345, msgOutCounter: 12000, storageSize: 7340032, backlogSize: 20480,
    publishers: [{ producerName: 'standalone-0-1', producerId: 0, accessMode: 'Shared', address: '/127.0.0.1:50122', msgRateIn: 2.43,
      clientVersion: 'Pulsar-Go-version-0.14', connectedSince: '2025-12-04T10:00:00Z' }],
    subscriptions: topic === 'idle' ? {} : subscriptions, replication: topic === 'mirror' ? replication : {},
    deduplicationStatus: 'Disabled', topicCreationTimeStamp: 1764800000000, lastPublishTimeStamp: Date.now() - 1000 };
}
function history() {
  const end = Math.floor(Date.now() / 5000) * 5000;
  return { intervalSeconds: 5, samples: Array.from({ length: 120 }, (_, i) => {
    const t = end - (119 - i) * 5000;
    return { t, msgRateIn: 5 + 4 * Math.sin(t / 60000), msgRateOut: 4 + 3 * Math.cos(t / 50000), msgThroughputIn: 5000,
      msgThroughputOut: 4000, backlog: 10 + Math.round(8 * Math.sin(t / 90000)), storageSize: 1e6 };
  }) };
}
const overview = () => ({
  cluster: 'standalone',
  brokers: [{ url: 'http://127.0.0.1:8080', reachable: true, error: '', topics: 5, bundles: 4, msgRateIn: 12.5, msgRateOut: 6.25,
    msgThroughputIn: 12500, msgThroughputOut: 6250, storageSize: 123456789, backlog: 120025 }],
  bookies,
  totals: { brokers: 1, bookies: 2, writableBookies: 1, bundles: 4, topics: 5, msgRateIn: 12.5, msgRateOut: 6.25,
    msgThroughputIn: 12500, msgThroughputOut: 6250, storageSize: 123456789, backlog: 120025 },
  alerts: [{ severity: 'warning', name: 'BookieReadOnly', summary: 'bookie 127.0.0.1:3182 is read-only: disk full' }],
});

// peek answers entry n of the topic, n from 1, up to 3 entries.
function peek(res, topic, n) {
  if (n > 3) return json(res, 404, { reason: 'Message not found' });
  const headers = { 'X-Pulsar-Message-ID': `7:${n - 1}`, 'X-Pulsar-Publish-Time': '2025-12-04T10:00:00.000Z',
    'X-Pulsar-Producer-Name': 'standalone-0-1', 'X-Pulsar-Sequence-Id': String(n), 'X-Pulsar-Partition-Key': `k${n}`,
    'X-Pulsar-Property': JSON.stringify({ origin: 'mock' }), 'Content-Type': 'application/octet-stream' };
  const body = topic === 'orders' ? orderAvro(n) : topic === 'events' ? Buffer.from(JSON.stringify({ id: n, item: 'x' }))
    : Buffer.from(`hello ${n}`);
  res.writeHead(200, headers).end(body);
}

const routes = [
  [/^session$/, () => [200, { authEnabled: AUTH, authMethods: ['token', 'basic'], role: AUTH ? 'admin' : '', superUser: true,
    readOnly: READ_ONLY, cluster: 'standalone', version: 'dev-mock' }]],
  [/^overview$/, () => [200, overview()]],
  [/^bookies$/, () => [200, bookies]],
  [/^namespaces\/([^/]+\/[^/]+)\/topics$/, (m) => [200, topics[m[1]] ?? []]],
  [/^history\//, () => [200, history()]],
  [/^admin\/v2\/tenants$/, () => [200, ['public', 'acme']]],
  [/^admin\/v2\/tenants\/([^/]+)$/, () => [200, { adminRoles: ['ops'], allowedClusters: ['standalone', 'c2'] }]],
  [/^admin\/v2\/namespaces\/([^/]+)$/, (m) => [200, m[1] === 'acme' ? ['acme/geo', 'acme/private'] : [`${m[1]}/default`]]],
  [/^admin\/v2\/namespaces\/acme\/private$/, () => [403, { reason: 'Client [bob] is not authorized to access acme/private' }]],
  [/^admin\/v2\/namespaces\/[^/]+\/([^/]+)$/, (m) => [200, { replication_clusters: m[1] === 'geo' ? ['standalone', 'c2'] : ['standalone'],
    retention_policies: { retentionTimeInMinutes: 60, retentionSizeInMB: 100 }, message_ttl_in_seconds: 0 }]],
  [/^admin\/v2\/schemas\/[^/]+\/[^/]+\/([^/]+)\/schemas$/, (m) => [200, { getSchemaResponses: schemas[m[1]] ? [schemas[m[1]]] : [] }]],
  [/^admin\/v2\/[a-z-]+\/[^/]+\/[^/]+\/([^/]+)\/partitions$/, (m) => [200, { partitions: m[1] === 'big' ? 4 : 0 }]],
  [/^admin\/v2\/[a-z-]+\/[^/]+\/[^/]+\/([^/]+?)(-partition-\d+)?\/(partitioned-)?stats$/, (m) => [200, stats(m[1])]],
  [/^admin\/v2\/[a-z-]+\/[^/]+\/[^/]+\/[^/]+\/internalStats$/, () => [200, { numberOfEntries: 3 }]],
];

function json(res, status, body) {
  res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(body));
}

function authorized(req) {
  const h = req.headers.authorization ?? '';
  return !AUTH || h === 'Bearer secret' || h === 'Basic ' + Buffer.from('admin:admin').toString('base64');
}

function api(req, res, path) {
  if (!authorized(req)) return json(res, 401, { reason: 'Authentication required', authMethods: ['token', 'basic'] });
  if (req.method !== 'GET') {
    if (READ_ONLY) return json(res, 403, { reason: 'the console is read-only (consoleReadOnly)' });
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => console.log(req.method, path, body));
    return res.writeHead(204).end();
  }
  const p = /\/([^/]+?)(?:-partition-\d+)?\/subscription\/[^/]+\/position\/(\d+)$/.exec(path);
  if (p) return peek(res, p[1], Number(p[2]));
  const e = /\/([^/]+?)(?:-partition-\d+)?\/examinemessage\?.*messagePosition=(\d+)/.exec(path);
  if (e) return peek(res, e[1], Number(e[2]));
  for (const [pattern, answer] of routes) {
    const m = pattern.exec(path.split('?')[0]);
    if (m) return json(res, ...answer(m));
  }
  json(res, 404, { reason: `mock: no canned answer for ${path}` });
}

createServer(async (req, res) => {
  const url = new URL(req.url, 'http://x');
  if (url.pathname.startsWith('/console/api/')) return api(req, res, url.pathname.slice(13) + url.search);
  if (!url.pathname.startsWith('/console')) return res.writeHead(302, { Location: '/console/' }).end();
  const asset = url.pathname.startsWith('/console/assets/') ? url.pathname.slice(9) : 'index.html';
  try {
    const body = await readFile(join(DIST, asset));
    res.writeHead(200, { 'Content-Type': types[extname(asset)] ?? 'application/octet-stream' }).end(body);
  } catch {
    res.writeHead(404).end();
  }
}).listen(PORT, '127.0.0.1', () => console.log(`mock broker on http://127.0.0.1:${PORT}/console/`));
