// Hash routes (#/...), so the broker serves one index.html for the whole
// console. Path parts are URI-encoded in links and decoded here.
import { useEffect, useState } from 'preact/hooks';

const enc = encodeURIComponent;

export function parseRoute(hash) {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(safeDecode);
  const [page = 'overview', ...args] = parts;
  const shapes = {
    login: 0, overview: 0, tenants: [0, 1], namespaces: 2, topics: 4, bookies: 0, replication: 0,
  };
  const shape = shapes[page];
  const fits = Array.isArray(shape) ? shape.includes(args.length) : shape === args.length;
  if (!fits) return { page: 'notfound', args: parts };
  if (page === 'tenants' && args.length === 1) return { page: 'tenant', args };
  return { page, args };
}

function safeDecode(part) {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

export function useRoute() {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const onChange = () => setHash(location.hash);
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return { hash, ...parseRoute(hash) };
}

export const links = {
  tenant: (t) => `#/tenants/${enc(t)}`,
  // ns is "tenant/namespace", as the admin API lists it.
  namespace: (ns) => `#/namespaces/${ns.split('/').map(enc).join('/')}`,
  topic: (fullName) => {
    const p = topicParts(fullName);
    return `#/topics/${[p.domain, p.tenant, p.namespace, p.topic].map(enc).join('/')}`;
  },
};

// topicParts splits "persistent://t/ns/name".
export function topicParts(fullName) {
  const m = /^([a-z-]+):\/\/([^/]+)\/([^/]+)\/(.+)$/.exec(fullName);
  if (!m) return { domain: 'persistent', tenant: '', namespace: '', topic: fullName };
  return { domain: m[1], tenant: m[2], namespace: m[3], topic: m[4] };
}

// adminTopicPath is the admin API's path of a topic, without a leading slash.
export function adminTopicPath({ domain, tenant, namespace, topic }) {
  return `admin/v2/${enc(domain)}/${enc(tenant)}/${enc(namespace)}/${enc(topic)}`;
}

// followRowLink lets a whole table row act as its link, so a click
// anywhere on it navigates; clicks on controls inside it are left alone.
export function followRowLink(href) {
  return (event) => {
    if (event.target.closest('a, button, input, select, textarea')) return;
    location.hash = href;
  };
}
