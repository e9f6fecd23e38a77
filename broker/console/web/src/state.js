// The state every page shares: who is signed in, whether the broker
// answers, and the error banner. Kept in small stores outside the
// component tree so that the API layer (which has no component) can
// update them too.
import { useEffect, useState } from 'preact/hooks';

export function createStore(initial) {
  let value = initial;
  const watchers = new Set();
  return {
    get: () => value,
    set(next) {
      value = next;
      for (const watch of watchers) watch(value);
    },
    watch(fn) {
      watchers.add(fn);
      return () => watchers.delete(fn);
    },
  };
}

export function useStore(store) {
  const [value, setValue] = useState(store.get());
  useEffect(() => {
    setValue(store.get()); // it may have changed between render and effect
    return store.watch(setValue);
  }, [store]);
  return value;
}

// session: null while unknown, then {authenticated: false, authMethods}
// or the /console/api/session answer with authenticated: true.
export const session = createStore(null);

// conn: 'live' while the broker answers, 'reconnecting' while it does not.
export const conn = createStore('live');

// banner: null or {message, source}. A poll clears only what it showed
// itself, so a failed action stays visible while the page keeps polling.
export const banner = createStore(null);

export function reportError(err, source = 'action') {
  if (err?.status === 401) return; // the API layer has gone to the login page
  if (err?.status === 0) return; // conn-status already says the broker is unreachable
  banner.set({ message: err?.message || String(err), source });
}

export function clearError(source) {
  if (banner.get()?.source === source) banner.set(null);
}
