// What the message viewer shows of a peeked or examined entry. The admin
// API answers one entry: its payload as the body and its metadata in
// X-Pulsar-* headers. A batch's body is its records, each
//
//   [4-byte big-endian size][SingleMessageMetadata (protobuf)][payload]
//
// and the viewer shows every message of it, as pulsar-admin does.
import { decodeAvro, toHex } from './avro.js';

// maxBatch bounds the records read from one entry.
const maxBatch = 10_000;

// messagesOf: headers is an object of lowercase header names.
export function messagesOf(headers, body) {
  const entry = {
    id: headers['x-pulsar-message-id'] ?? '',
    publishTime: headers['x-pulsar-publish-time'] ?? '',
    eventTime: headers['x-pulsar-event-time'] ?? '',
    producer: headers['x-pulsar-producer-name'] ?? '',
    sequenceId: headers['x-pulsar-sequence-id'] ?? '',
    key: headers['x-pulsar-partition-key'] ?? '',
    properties: propertiesOf(headers),
  };
  const count = Number(headers['x-pulsar-num-batch-message']);
  if (!count) return [{ ...entry, payload: body }];
  let records;
  try {
    records = splitBatch(body, Math.min(count, maxBatch));
  } catch {
    return [{ ...entry, payload: body }]; // not a batch after all: show it whole
  }
  return records.map(({ metadata, payload }, i) => ({
    ...entry,
    id: `${entry.id}:${i}`,
    key: metadata.partitionKey ?? entry.key,
    eventTime: metadata.eventTime ? new Date(metadata.eventTime).toISOString() : entry.eventTime,
    sequenceId: metadata.sequenceId === undefined ? entry.sequenceId : String(metadata.sequenceId),
    properties: { ...entry.properties, ...metadata.properties },
    payload,
  }));
}

// propertiesOf reads X-Pulsar-Property (one JSON object, which keeps the
// keys' case) and Pulsar's X-Pulsar-PROPERTY-<key> headers.
function propertiesOf(headers) {
  const props = {};
  for (const [name, value] of Object.entries(headers)) {
    if (name.startsWith('x-pulsar-property-')) props[name.slice('x-pulsar-property-'.length)] = value;
  }
  try {
    Object.assign(props, JSON.parse(headers['x-pulsar-property'] ?? '{}'));
  } catch {
    // a malformed header: the per-key headers are all there is
  }
  return props;
}

export function splitBatch(body, count) {
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const records = [];
  let pos = 0;
  for (let i = 0; i < count; i++) {
    if (pos + 4 > body.length) throw new Error(`batch record ${i}: truncated size`);
    const size = view.getUint32(pos);
    pos += 4;
    if (pos + size > body.length) throw new Error(`batch record ${i}: truncated metadata`);
    const metadata = singleMessageMetadata(body.subarray(pos, pos + size));
    pos += size;
    const end = pos + (metadata.payloadSize ?? 0);
    if (end > body.length) throw new Error(`batch record ${i}: truncated payload`);
    records.push({ metadata, payload: body.subarray(pos, end) });
    pos = end;
  }
  return records;
}

// singleMessageMetadata decodes the fields of PulsarApi.proto's
// SingleMessageMetadata that the viewer shows.
export function singleMessageMetadata(bytes) {
  const md = { properties: {} };
  const text = new TextDecoder();
  for (const { field, value } of protoFields(bytes)) {
    if (field === 1) {
      const kv = {};
      for (const f of protoFields(value)) kv[f.field] = text.decode(f.value);
      md.properties[kv[1] ?? ''] = kv[2] ?? '';
    } else if (field === 2) md.partitionKey = text.decode(value);
    else if (field === 3) md.payloadSize = value;
    else if (field === 5) md.eventTime = value;
    else if (field === 8) md.sequenceId = value;
  }
  return md;
}

// protoFields lists a protobuf message's fields: varints as numbers
// (exact below 2^53, which covers times and sequence ids), length-delimited
// ones as bytes; fixed-width ones are skipped.
function* protoFields(bytes) {
  let pos = 0;
  const varint = () => {
    let value = 0;
    for (let scale = 1; ; scale *= 128) {
      if (pos >= bytes.length || scale > 2 ** 63) throw new Error('bad protobuf varint');
      const b = bytes[pos++];
      value += (b & 0x7f) * scale;
      if (!(b & 0x80)) return value;
    }
  };
  while (pos < bytes.length) {
    const tag = varint();
    const field = Math.floor(tag / 8);
    const wire = tag % 8;
    if (wire === 0) yield { field, value: varint() };
    else if (wire === 2) {
      const n = varint();
      if (pos + n > bytes.length) throw new Error('truncated protobuf field');
      yield { field, value: bytes.subarray(pos, pos + n) };
      pos += n;
    } else if (wire === 1) pos += 8;
    else if (wire === 5) pos += 4;
    else throw new Error(`protobuf wire type ${wire}`);
  }
}

// renderPayload shows a payload per the topic's schema (a GetSchemaResponse,
// or null for none): JSON pretty-printed, STRING and no schema as text,
// AVRO decoded, anything else hex.
export function renderPayload(payload, schema) {
  const type = schema?.type ?? 'NONE';
  if (type === 'STRING') return new TextDecoder().decode(payload);
  if (type === 'NONE' || type === 'BYTES') return textOrHex(payload);
  if (type === 'JSON') {
    try {
      return pretty(JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(payload)));
    } catch {
      return textOrHex(payload);
    }
  }
  if (type === 'AVRO') {
    try {
      return pretty(decodeAvro(JSON.parse(schema.data), payload));
    } catch (err) {
      return `(not decodable with the Avro schema: ${err.message})\n${hexDump(payload)}`;
    }
  }
  return hexDump(payload);
}

function textOrHex(payload) {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(payload);
  } catch {
    return hexDump(payload);
  }
}

// pretty is JSON.stringify that also shows BigInts and non-finite numbers.
export function pretty(value) {
  return JSON.stringify(
    value,
    (_, v) => (typeof v === 'bigint' || (typeof v === 'number' && !Number.isFinite(v)) ? String(v) : v),
    2,
  );
}

// hexDump: 16 bytes a line, space-separated pairs.
export function hexDump(bytes) {
  const lines = [];
  for (let i = 0; i < bytes.length; i += 16) {
    lines.push(toHex(bytes.subarray(i, i + 16)).replace(/(..)(?!$)/g, '$1 '));
  }
  return lines.join('\n');
}
