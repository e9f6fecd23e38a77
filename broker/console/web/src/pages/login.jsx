// Sign in with a token, or a user name and password when the broker
// offers basic authentication. The credentials live in sessionStorage
// only (see api.js).
import { useState } from 'preact/hooks';
import { basicAuth, credentials, loadSession, takeReturnTo } from '../api.js';
import { session, useStore } from '../state.js';

export function Login() {
  const current = useStore(session);
  const [token, setToken] = useState('');
  const [user, setUser] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const methods = current?.authMethods?.length ? current.authMethods : ['token', 'basic'];

  const submit = async (event) => {
    event.preventDefault();
    if (!token.trim() && !user) {
      setError(methods.includes('token') ? 'Paste a token or enter a user name.' : 'Enter a user name.');
      return;
    }
    setBusy(true);
    credentials.set(token.trim() ? `Bearer ${token.trim()}` : basicAuth(user, password));
    try {
      if (await loadSession()) {
        location.hash = takeReturnTo();
        return;
      }
      credentials.clear();
      setError(session.get()?.reason || 'The broker refused these credentials.');
    } catch (err) {
      credentials.clear();
      setError(err.message);
    } finally {
      setBusy(false);
    }
  };

  return (
    <div class="center">
      <form class="card login" onSubmit={submit}>
        <h1>Magnetar console</h1>
        {current?.authenticated && current.authEnabled === false && (
          <p class="muted">
            Authentication is off on this cluster. <a href="#/overview">Continue</a>
          </p>
        )}
        {error && (
          <div class="banner" role="alert" data-testid="error">
            {error}
          </div>
        )}
        {methods.includes('token') && (
          <label>
            Token
            <textarea data-testid="login-token" rows={4} value={token} onInput={(e) => setToken(e.target.value)} />
          </label>
        )}
        {methods.includes('token') && methods.includes('basic') && <p class="or">or</p>}
        {methods.includes('basic') && (
          <>
            <label>
              User name
              <input data-testid="login-username" autocomplete="username" value={user} onInput={(e) => setUser(e.target.value)} />
            </label>
            <label>
              Password
              <input
                data-testid="login-password"
                type="password"
                autocomplete="current-password"
                value={password}
                onInput={(e) => setPassword(e.target.value)}
              />
            </label>
          </>
        )}
        <button type="submit" data-testid="login-submit" disabled={busy}>
          Sign in
        </button>
      </form>
    </div>
  );
}
