import assert from 'node:assert/strict';
import { test } from 'node:test';
import { hexDump, messagesOf, renderPayload } from '../src/message.js';

const text = (s) => new TextEncoder().encode(s);

// batchRecord writes [size][SingleMessageMetadata][payload] with
// properties {k: v}, partition_key and payload_size set.
function batchRecord(key, payload) {
  const kv = [0x0a, 1, ...text('k'), 0x12, 1, ...text('v')];
  const md = [0x0a, kv.length, ...kv, 0x12, key.length, ...text(key), 0x18, payload.length];
  return [0, 0, 0, md.length, ...md, ...text(payload)];
}

test('a plain entry: metadata from the headers', () => {
  const [m] = messagesOf(
    {
      'x-pulsar-message-id': '3:7',
      'x-pulsar-publish-time': '2025-12-04T10:00:00.000Z',
      'x-pulsar-partition-key': 'user-1',
      'x-pulsar-property': '{"Trace":"abc"}',
      'x-pulsar-property-legacy': 'yes',
    },
    text('hello'),
  );
  assert.equal(m.id, '3:7');
  assert.equal(m.key, 'user-1');
  assert.deepEqual(m.properties, { Trace: 'abc', legacy: 'yes' });
  assert.equal(renderPayload(m.payload, null), 'hello');
});

test('a batch: one message per record', () => {
  const body = new Uint8Array([...batchRecord('a', 'one'), ...batchRecord('b', 'two')]);
  const ms = messagesOf({ 'x-pulsar-message-id': '3:8', 'x-pulsar-num-batch-message': '2' }, body);
  assert.deepEqual(ms.map((m) => [m.id, m.key, new TextDecoder().decode(m.payload)]), [
    ['3:8:0', 'a', 'one'],
    ['3:8:1', 'b', 'two'],
  ]);
  assert.deepEqual(ms[1].properties, { k: 'v' });
});

test('a body that is not the batch it claims is shown whole', () => {
  const ms = messagesOf({ 'x-pulsar-num-batch-message': '2' }, text('xy'));
  assert.equal(ms.length, 1);
});

test('payloads per schema type', () => {
  assert.equal(renderPayload(text('{"a":1}'), { type: 'JSON' }), '{\n  "a": 1\n}');
  assert.equal(renderPayload(text('plain'), { type: 'STRING' }), 'plain');
  assert.equal(renderPayload(new Uint8Array([0xff, 0x00]), null), 'ff 00');
  assert.equal(renderPayload(new Uint8Array([0, 0, 0, 7]), { type: 'INT32' }), '00 00 00 07');
  const avro = { type: 'AVRO', data: '{"type":"record","name":"r","fields":[{"name":"n","type":"long"}]}' };
  assert.equal(renderPayload(new Uint8Array([0x36]), avro), '{\n  "n": 27\n}');
  assert.match(renderPayload(new Uint8Array([0x36, 1]), avro), /not decodable.*\n36 01/);
  assert.equal(hexDump(new Uint8Array(17)).split('\n').length, 2);
});
