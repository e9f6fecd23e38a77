import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatBytes, formatRate, formatThroughput } from '../src/format.js';
import { parseRoute, topicParts } from '../src/router.js';

test('human numbers', () => {
  assert.equal(formatBytes(1000), '1000 B');
  assert.equal(formatBytes(12345), '12.1 KiB');
  assert.equal(formatBytes(5 * 2 ** 30), '5.0 GiB');
  assert.equal(formatRate(1.46), '1.5 msg/s');
  assert.equal(formatThroughput(2048), '2.0 KiB/s');
});

test('routes', () => {
  assert.deepEqual(parseRoute(''), { page: 'overview', args: [] });
  assert.deepEqual(parseRoute('#/tenants/a%2Fb'), { page: 'tenant', args: ['a/b'] });
  assert.deepEqual(parseRoute('#/topics/persistent/t/ns/x'), { page: 'topics', args: ['persistent', 't', 'ns', 'x'] });
  assert.equal(parseRoute('#/topics/t').page, 'notfound');
  assert.deepEqual(topicParts('non-persistent://t/ns/a-partition-1'), {
    domain: 'non-persistent', tenant: 't', namespace: 'ns', topic: 'a-partition-1',
  });
});
