// The shell: which page the hash names, the left navigation, the
// connection state and the error banner.
import { useEffect } from 'preact/hooks';
import { goToLogin, loadSession, signOut } from './api.js';
import { Bookies } from './pages/bookies.jsx';
import { Login } from './pages/login.jsx';
import { Namespace } from './pages/namespace.jsx';
import { Overview } from './pages/overview.jsx';
import { Replication } from './pages/replication.jsx';
import { Tenant, Tenants } from './pages/tenants.jsx';
import { Topic } from './pages/topic.jsx';
import { POLL_MS } from './poll.js';
import { useRoute } from './router.js';
import { banner, conn, session, useStore } from './state.js';

const pages = {
  overview: () => <Overview />,
  tenants: () => <Tenants />,
  tenant: ([tenant]) => <Tenant tenant={tenant} />,
  namespaces: ([tenant, namespace]) => <Namespace tenant={tenant} namespace={namespace} />,
  topics: ([domain, tenant, namespace, topic]) => <Topic name={{ domain, tenant, namespace, topic }} />,
  bookies: () => <Bookies />,
  replication: () => <Replication />,
  notfound: () => <p>There is no such page. <a href="#/overview">Overview</a></p>,
};

export function App() {
  const route = useRoute();
  const current = useStore(session);
  useSessionOnStart();
  // A new page starts without the last page's error.
  useEffect(() => {
    banner.set(null);
  }, [route.hash]);
  useEffect(() => {
    if (current && !current.authenticated && route.page !== 'login') goToLogin();
  }, [current, route.page]);

  if (route.page === 'login') return <Login />;
  if (!current?.authenticated) return <Connecting />;
  return (
    <Shell route={route} session={current}>
      {pages[route.page](route.args)}
    </Shell>
  );
}

// useSessionOnStart asks who we are, again every POLL_MS while the broker
// does not answer.
function useSessionOnStart() {
  useEffect(() => {
    let timer;
    const attempt = () =>
      loadSession().catch((err) => {
        if (err.status === 0 || err.status >= 500) timer = setTimeout(attempt, POLL_MS);
        else banner.set({ message: err.message, source: 'session' });
      });
    attempt();
    return () => clearTimeout(timer);
  }, []);
}

function Connecting() {
  const error = useStore(banner);
  return (
    <div class="center">
      <p>Connecting to the broker… <ConnStatus /></p>
      {error && <ErrorBanner error={error} />}
    </div>
  );
}

const navItems = [
  ['overview', 'Overview', ['overview']],
  ['tenants', 'Tenants', ['tenants', 'tenant', 'namespaces', 'topics']],
  ['bookies', 'Bookies', ['bookies']],
  ['replication', 'Replication', ['replication']],
];

function Shell({ route, session: s, children }) {
  const error = useStore(banner);
  return (
    <div class="shell">
      <nav class="side">
        <div class="brand">
          Magnetar <span class="cluster">{s.cluster}</span>
        </div>
        {navItems.map(([id, label, pagesOf]) => (
          <a key={id} href={`#/${id}`} data-testid={`nav-${id}`} class={pagesOf.includes(route.page) ? 'active' : ''}>
            {label}
          </a>
        ))}
        <div class="side-foot">
          <div>
            <div class="muted small">Signed in as</div>
            <b data-testid="whoami">{s.role || 'anonymous'}</b>
          </div>
          {s.readOnly && <div class="badge">read-only</div>}
          <div>
            Broker: <ConnStatus />
          </div>
          {s.authEnabled && (
            <button type="button" data-testid="logout" onClick={signOut}>
              Log out
            </button>
          )}
          {s.version && <div class="muted small">version {s.version}</div>}
        </div>
      </nav>
      <main class="content">
        {error && <ErrorBanner error={error} />}
        {children}
      </main>
    </div>
  );
}

function ConnStatus() {
  const state = useStore(conn);
  return (
    <span data-testid="conn-status" class={`conn ${state}`}>
      {state}
    </span>
  );
}

function ErrorBanner({ error }) {
  return (
    <div class="banner" role="alert">
      <span data-testid="error">{error.message}</span>
      <button type="button" class="link" onClick={() => banner.set(null)} aria-label="dismiss">
        ×
      </button>
    </div>
  );
}
