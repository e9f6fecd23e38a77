// Every call to the broker goes through here: it adds the credentials,
// turns Pulsar's {"reason": ...} errors into ApiError, keeps conn-status
// current and sends a 401 to the login page.
import { conn, session } from './state.js';

const API = '/console/api/';
const AUTH_KEY = 'magnetar.console.authorization';
const RETURN_KEY = 'magnetar.console.returnTo';

export class ApiError extends Error {
  // status 0: the broker did not answer at all.
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export const credentials = {
  get: () => sessionStorage.getItem(AUTH_KEY),
  set: (header) => sessionStorage.setItem(AUTH_KEY, header),
  clear: () => sessionStorage.removeItem(AUTH_KEY),
};

// basicAuth encodes user:password as UTF-8 before base64, as servers expect.
export function basicAuth(user, password) {
  const bytes = new TextEncoder().encode(`${user}:${password}`);
  return 'Basic ' + btoa(String.fromCharCode(...bytes));
}

// The page to return to after signing in again.
export function takeReturnTo() {
  const hash = sessionStorage.getItem(RETURN_KEY);
  sessionStorage.removeItem(RETURN_KEY);
  return hash && !hash.startsWith('#/login') ? hash : '#/overview';
}

export function goToLogin() {
  if (!location.hash.startsWith('#/login')) {
    sessionStorage.setItem(RETURN_KEY, location.hash || '#/overview');
    location.hash = '#/login';
  }
}

// send performs one call and answers the Response when it is 2xx.
export async function send(path, { method = 'GET', body } = {}) {
  const headers = {};
  const auth = credentials.get();
  if (auth) headers.Authorization = auth;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(API + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
    });
  } catch (err) {
    conn.set('reconnecting');
    throw new ApiError(0, `the broker is unreachable (${err.message})`);
  }
  // A gateway error means the broker behind it is away (restarting).
  conn.set(res.status >= 502 && res.status <= 504 ? 'reconnecting' : 'live');
  if (res.ok) return res;
  const reason = await reasonOf(res);
  if (res.status === 401) signedOut(reason);
  throw new ApiError(res.status, reason);
}

export async function getJSON(path) {
  return (await send(path)).json();
}

// call performs an action whose answer, if any, is not needed.
export async function call(method, path, body) {
  await send(path, { method, body });
}

async function reasonOf(res) {
  const text = await res.text().catch(() => '');
  try {
    const parsed = JSON.parse(text);
    if (parsed?.reason) return parsed.reason;
    if (parsed?.message) return parsed.message;
  } catch {
    // not JSON: the text itself is the best reason there is
  }
  return `${res.status} ${res.statusText}${text ? ': ' + text.slice(0, 300) : ''}`;
}

function signedOut(reason) {
  credentials.clear();
  const known = session.get();
  session.set({ authenticated: false, authMethods: known?.authMethods, reason });
  goToLogin();
}

// loadSession asks who the stored credentials belong to and records the
// answer: true when signed in, false on 401 (the login page's case).
// Other failures throw.
export async function loadSession() {
  const headers = {};
  const auth = credentials.get();
  if (auth) headers.Authorization = auth;
  let res;
  try {
    res = await fetch(API + 'session', { headers, cache: 'no-store' });
  } catch (err) {
    conn.set('reconnecting');
    throw new ApiError(0, `the broker is unreachable (${err.message})`);
  }
  conn.set(res.status >= 502 && res.status <= 504 ? 'reconnecting' : 'live');
  if (res.ok) {
    session.set({ ...(await res.json()), authenticated: true });
    return true;
  }
  if (res.status !== 401) throw new ApiError(res.status, await reasonOf(res));
  const body = await res.json().catch(() => ({}));
  session.set({
    authenticated: false,
    authMethods: body.authMethods ?? methodsFromChallenge(res.headers.get('WWW-Authenticate')),
    reason: body.reason,
  });
  return false;
}

// methodsFromChallenge reads the offered methods from a 401's challenge
// when its body does not list them; with neither, both are offered.
export function methodsFromChallenge(challenge) {
  const lower = (challenge ?? '').toLowerCase();
  const methods = [];
  if (lower.includes('bearer')) methods.push('token');
  if (lower.includes('basic')) methods.push('basic');
  return methods.length ? methods : ['token', 'basic'];
}

export function signOut() {
  credentials.clear();
  const known = session.get();
  // With authentication off there is nothing to sign out of: the login
  // page says so and links back.
  if (known?.authEnabled !== false) session.set({ authenticated: false, authMethods: known?.authMethods });
  location.hash = '#/login';
}
