// A decoder of Avro's binary encoding, for showing the messages of a
// topic whose schema is AVRO (Pulsar stores the bare datum: no header, no
// fingerprint). The schema is the writer's, as the registry holds it.
//
// Values come out as a person wants to read them, not in Avro's JSON
// encoding: a union is its branch's value, an enum its symbol, a map an
// object, bytes and fixed lowercase hex. A long that does not fit a
// double exactly is a BigInt.
//
// https://avro.apache.org/docs/1.11.1/specification/#binary-encoding

// maxItems bounds the items of all arrays and maps of one datum: an item
// can take no bytes (null), so the input's length alone bounds nothing.
const maxItems = 1_000_000;

export function decodeAvro(schema, bytes) {
  const decode = compile(schema, '', new Map());
  const reader = new Reader(bytes);
  const value = decode(reader);
  if (reader.pos !== bytes.length) {
    throw new Error(`${bytes.length - reader.pos} bytes left after the value`);
  }
  return value;
}

class Reader {
  constructor(bytes) {
    this.bytes = bytes;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.pos = 0;
    this.items = 0;
  }

  take(n) {
    if (n < 0 || this.pos + n > this.bytes.length) {
      throw new Error(`truncated: ${n} bytes wanted at ${this.pos} of ${this.bytes.length}`);
    }
    const start = this.pos;
    this.pos += n;
    return start;
  }

  // long reads a zigzag varint (int and long share the encoding).
  long() {
    let raw = 0n;
    for (let shift = 0n; ; shift += 7n) {
      if (shift > 63n) throw new Error(`varint longer than 10 bytes at ${this.pos}`);
      const b = this.bytes[this.take(1)];
      raw |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
    const value = (raw >> 1n) ^ -(raw & 1n);
    const asNumber = Number(value);
    return Number.isSafeInteger(asNumber) ? asNumber : value;
  }

  int() {
    const v = this.long();
    if (typeof v !== 'number' || v < -(2 ** 31) || v >= 2 ** 31) throw new Error(`int out of range: ${v}`);
    return v;
  }

  length() {
    const n = this.long();
    if (typeof n !== 'number' || n < 0) throw new Error(`bad length ${n} at ${this.pos}`);
    return n;
  }

  raw(n) {
    const start = this.take(n);
    return this.bytes.subarray(start, start + n);
  }

  // blocks reads an array's or map's blocks, calling item for each entry.
  blocks(item) {
    for (;;) {
      let count = this.long();
      if (count === 0) return;
      if (typeof count !== 'number') throw new Error(`block count out of range: ${count}`);
      if (count < 0) {
        count = -count;
        this.length(); // the block's size in bytes, for skipping; not needed
      }
      this.items += count;
      if (this.items > maxItems) throw new Error(`more than ${maxItems} array or map items`);
      for (let i = 0; i < count; i++) item();
    }
  }
}

const utf8 = new TextDecoder();

export function toHex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

const primitives = {
  null: () => null,
  boolean: (r) => r.bytes[r.take(1)] !== 0,
  int: (r) => r.int(),
  long: (r) => r.long(),
  float: (r) => r.view.getFloat32(r.take(4), true),
  double: (r) => r.view.getFloat64(r.take(8), true),
  bytes: (r) => toHex(r.raw(r.length())),
  string: (r) => utf8.decode(r.raw(r.length())),
};

// compile turns a schema into a decoding function. named holds the
// record, enum and fixed decoders by full name (and short name), looked up
// when a datum is read so that recursive and forward references work.
function compile(schema, namespace, named) {
  if (typeof schema === 'string') return reference(schema, namespace, named);
  if (Array.isArray(schema)) return union(schema, namespace, named);
  if (!schema || typeof schema !== 'object') throw new Error(`not a schema: ${JSON.stringify(schema)}`);
  switch (schema.type) {
    case 'record':
    case 'error':
      return record(schema, namespace, named);
    case 'enum':
      return define(schema, namespace, named, (r) => enumSymbol(schema, r.int()));
    case 'fixed':
      return define(schema, namespace, named, (r) => toHex(r.raw(schema.size)));
    case 'array': {
      const item = compile(schema.items, namespace, named);
      return (r) => {
        const out = [];
        r.blocks(() => out.push(item(r)));
        return out;
      };
    }
    case 'map': {
      const value = compile(schema.values, namespace, named);
      return (r) => {
        const out = {};
        r.blocks(() => {
          const key = primitives.string(r);
          out[key] = value(r);
        });
        return out;
      };
    }
    default:
      // {"type": "long", "logicalType": ...} and the like: the underlying type.
      return compile(schema.type, namespace, named);
  }
}

function reference(name, namespace, named) {
  if (primitives[name]) return primitives[name];
  const full = fullName(name, namespace);
  return (r) => {
    const decode = named.get(full) ?? named.get(name);
    if (!decode) throw new Error(`unknown type ${name}`);
    return decode(r);
  };
}

function union(branches, namespace, named) {
  const decoders = branches.map((b) => compile(b, namespace, named));
  return (r) => {
    const index = r.long();
    if (!decoders[index]) throw new Error(`union branch ${index} of ${decoders.length}`);
    return decoders[index](r);
  };
}

function record(schema, namespace, named) {
  const fields = [];
  const decode = define(schema, namespace, named, (r) => {
    const out = {};
    for (const [name, field] of fields) out[name] = field(r);
    return out;
  });
  // Fields resolve names in the record's own namespace.
  const inner = namespaceOf(fullName(schema.name, schema.namespace ?? namespace));
  for (const f of schema.fields ?? []) fields.push([f.name, compile(f.type, inner, named)]);
  return decode;
}

function define(schema, namespace, named, decode) {
  const full = fullName(schema.name, schema.namespace ?? namespace);
  named.set(full, decode);
  const short = full.slice(full.lastIndexOf('.') + 1);
  if (!named.has(short)) named.set(short, decode);
  return decode;
}

function enumSymbol(schema, index) {
  const symbol = schema.symbols?.[index];
  if (symbol === undefined) throw new Error(`enum ${schema.name}: no symbol ${index}`);
  return symbol;
}

function fullName(name, namespace) {
  return name.includes('.') || !namespace ? name : `${namespace}.${name}`;
}

function namespaceOf(full) {
  const dot = full.lastIndexOf('.');
  return dot < 0 ? '' : full.slice(0, dot);
}
