// Run with `node --test` (npm test). The encoder below writes Avro's
// binary encoding by hand, so each case states its bytes' meaning.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeAvro } from '../src/avro.js';

function long(n) {
  let z = BigInt(n) >= 0n ? BigInt(n) << 1n : (-BigInt(n) << 1n) - 1n;
  const out = [];
  do {
    let b = Number(z & 0x7fn);
    z >>= 7n;
    if (z) b |= 0x80;
    out.push(b);
  } while (z);
  return out;
}
const str = (s) => {
  const b = [...new TextEncoder().encode(s)];
  return [...long(b.length), ...b];
};
const f64 = (x) => {
  const v = new DataView(new ArrayBuffer(8));
  v.setFloat64(0, x, true);
  return [...new Uint8Array(v.buffer)];
};
const f32 = (x) => {
  const v = new DataView(new ArrayBuffer(4));
  v.setFloat32(0, x, true);
  return [...new Uint8Array(v.buffer)];
};
const bytes = (...parts) => new Uint8Array(parts.flat());

test('the specification example: a record of a long and a string', () => {
  const schema = { type: 'record', name: 'test', fields: [{ name: 'a', type: 'long' }, { name: 'b', type: 'string' }] };
  assert.deepEqual(decodeAvro(schema, bytes([0x36, 0x06, 0x66, 0x6f, 0x6f])), { a: 27, b: 'foo' });
});

test('primitives', () => {
  assert.equal(decodeAvro('null', bytes()), null);
  assert.equal(decodeAvro('boolean', bytes([1])), true);
  assert.equal(decodeAvro('int', bytes(long(-64))), -64);
  assert.equal(decodeAvro('long', bytes(long(2 ** 40))), 2 ** 40);
  assert.equal(decodeAvro('long', bytes(long(-(2n ** 63n)))), -(2n ** 63n));
  assert.equal(decodeAvro('double', bytes(f64(3.25))), 3.25);
  assert.equal(decodeAvro('float', bytes(f32(1.5))), 1.5);
  assert.equal(decodeAvro('string', bytes(str('héllo'))), 'héllo');
  assert.equal(decodeAvro('bytes', bytes(long(2), [0xde, 0xad])), 'dead');
  assert.equal(decodeAvro({ type: 'long', logicalType: 'timestamp-millis' }, bytes(long(1764866000000))), 1764866000000);
});

test('unions, enums, fixed, arrays and maps', () => {
  const schema = {
    type: 'record',
    name: 'Order',
    namespace: 'shop',
    fields: [
      { name: 'note', type: ['null', 'string'] },
      { name: 'missing', type: ['null', 'string'] },
      { name: 'state', type: { type: 'enum', name: 'State', symbols: ['NEW', 'PAID'] } },
      { name: 'digest', type: { type: 'fixed', name: 'Digest', size: 2 } },
      { name: 'items', type: { type: 'array', items: 'int' } },
      { name: 'tags', type: { type: 'map', values: 'long' } },
      { name: 'again', type: 'State' },
      { name: 'qualified', type: 'shop.Digest' },
    ],
  };
  const data = bytes(
    long(1), str('gift'),
    long(0),
    long(1),
    [0xab, 0xcd],
    long(2), long(7), long(8), long(0),
    // a map block with a negative count carries its size in bytes
    long(-1), long(3), str('k'), long(5), long(0),
    long(0),
    [0x01, 0x02],
  );
  assert.deepEqual(decodeAvro(schema, data), {
    note: 'gift', missing: null, state: 'PAID', digest: 'abcd', items: [7, 8], tags: { k: 5 }, again: 'NEW',
    qualified: '0102',
  });
});

test('a recursive record', () => {
  const schema = {
    type: 'record', name: 'Node', fields: [{ name: 'v', type: 'int' }, { name: 'next', type: ['null', 'Node'] }],
  };
  const data = bytes(long(1), long(1), long(2), long(0));
  assert.deepEqual(decodeAvro(schema, data), { v: 1, next: { v: 2, next: null } });
});

test('malformed input is an error, never a wrong value', () => {
  const schema = { type: 'record', name: 'r', fields: [{ name: 's', type: 'string' }] };
  assert.throws(() => decodeAvro(schema, bytes(long(5), [0x61])), /truncated/);
  assert.throws(() => decodeAvro('int', bytes(long(1), [0])), /bytes left/);
  assert.throws(() => decodeAvro(['null'], bytes(long(3))), /union branch/);
  assert.throws(() => decodeAvro('int', bytes(long(2 ** 33))), /out of range/);
  assert.throws(() => decodeAvro('long', bytes(new Array(11).fill(0xff))), /varint/);
  assert.throws(() => decodeAvro({ type: 'array', items: 'null' }, bytes(long(2_000_000), long(0))), /items/);
  assert.throws(() => decodeAvro('Nope', bytes()), /unknown type/);
});
