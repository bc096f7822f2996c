// A real OpenID Connect provider for Weft's tests: panva's oidc-provider (a certified
// implementation) with a login page of its own, users and clients from a JSON file, and
// signing keys that rotate without a restart. ../OIDC.md tells how a test drives it.
//
//   node provider.mjs CONFIG.json     serve on loopback; prints `ready ISSUER_URL` on stdout
//                                     once it answers, then logs to stderr only
//   node provider.mjs --rotate KEYS   prepend a new RS256 key to the JWKS file KEYS (the
//                                     old keys stay, so tokens they signed still verify),
//                                     print its kid; SIGHUP to the server then makes it sign
//
// Signals: SIGHUP re-reads keysFile and serves with the new key set (sessions, grants and
// tokens survive: they live in one in-memory store shared by every Provider instance);
// SIGTERM and SIGINT close the server and exit 0.
//
// Completing flows by HTTP (a cookie jar; follow by hand every redirect that stays on the
// issuer; details in ../OIDC.md):
//   login   GET /auth?... -> 303 /interaction/UID (the UID: that path segment; cookies
//           _interaction, _interaction_resume) -> GET it: the login page -> POST
//           /interaction/UID/login, urlencoded `login` and `password` -> 303 /auth/UID ->
//           303 redirect_uri?code=...&state=...&iss=... (wrong password: 200, the page again
//           with id="error")
//   device  POST /device/auth (client_id, scope) -> device_code, user_code; GET /device: a
//           form with the hidden `xsrf` (its secret is in the _session cookie set there) ->
//           POST /device `xsrf`, `user_code` -> the confirmation page -> POST /device `xsrf`,
//           `user_code`, `confirm=yes` -> 303 /interaction/UID: the login form as above ->
//           303 /device/UID: the success page; then the token endpoint issues the tokens
//           for device_code (authorization_pending before)
//
// Environment: WEFT_OIDC_WATCH_PID, if set, makes the server exit once that process is gone
// (as the sibling scripts' WEFT_*_WATCH_PID do), so a test that dies leaves nothing behind.

import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

// Only the `ready` line goes to stdout: oidc-provider prints its notices with console.info.
for (const name of ['log', 'info', 'debug']) {
  console[name] = (...args) => console.error(...args);
}

function log(...args) {
  console.error(`oidc-provider[${process.pid}]:`, ...args);
}

function die(msg) {
  console.error(`provider.mjs: ${msg}`);
  process.exit(1);
}

// ---------------------------------------------------------------------------------------
// Keys

function thumbprint(jwk) {
  // RFC 7638 for an RSA key: the required members in lexicographic order.
  const json = JSON.stringify({ e: jwk.e, kty: jwk.kty, n: jwk.n });
  return crypto.createHash('sha256').update(json).digest('base64url');
}

function generateKey() {
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = privateKey.export({ format: 'jwk' });
  return { kid: thumbprint(jwk), alg: 'RS256', use: 'sig', ...jwk };
}

function writeJson(file, value) {
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, `${JSON.stringify(value, null, 2)}\n`, { mode: 0o600 });
  fs.renameSync(tmp, file);
}

function readKeys(file) {
  let jwks;
  try {
    jwks = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read the JWKS ${file}: ${err.message}`);
  }
  if (!jwks || !Array.isArray(jwks.keys) || jwks.keys.length === 0) {
    throw new Error(`${file} is no JWKS with keys ({"keys": [...]})`);
  }
  const kids = new Set();
  for (const [i, key] of jwks.keys.entries()) {
    if (typeof key.kid !== 'string' || !key.kid) throw new Error(`${file}: key ${i} has no kid`);
    if (kids.has(key.kid)) throw new Error(`${file}: kid ${key.kid} twice`);
    kids.add(key.kid);
    if (!key.d) throw new Error(`${file}: key ${key.kid} is no private key (no "d")`);
  }
  return jwks;
}

// Reads the keys, creating the file with one fresh key when it does not exist.
function loadOrCreateKeys(file) {
  if (!fs.existsSync(file)) {
    fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
    const key = generateKey();
    writeJson(file, { keys: [key] });
    log(`generated signing key ${key.kid} in ${file}`);
  }
  return readKeys(file);
}

function rotate(file) {
  const jwks = fs.existsSync(file) ? readKeys(file) : { keys: [] };
  const key = generateKey();
  writeJson(file, { ...jwks, keys: [key, ...jwks.keys] });
  process.stdout.write(`${key.kid}\n`);
}

// ---------------------------------------------------------------------------------------
// Configuration

const CONFIG_KEYS = new Set([
  'host', 'port', 'keysFile', 'users', 'clients', 'idTokenTtlSeconds', 'accessTokenTtlSeconds',
]);
const CLIENT_KEYS_DEFAULTED = new Set([
  'client_id', 'client_secret', 'redirect_uris', 'grant_types', 'application_type',
  'post_logout_redirect_uris',
]);

function readConfig(file) {
  let config;
  try {
    config = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    die(`cannot read the config ${file}: ${err.message}`);
  }
  for (const key of Object.keys(config)) {
    if (!CONFIG_KEYS.has(key)) die(`${file}: unknown key "${key}" (known: ${[...CONFIG_KEYS].join(', ')})`);
  }
  if (typeof config.keysFile !== 'string') die(`${file}: "keysFile" (a path) is required`);
  config.keysFile = path.resolve(path.dirname(file), config.keysFile);
  config.host ??= '127.0.0.1';
  config.port ??= 0;
  config.idTokenTtlSeconds ??= 3600;
  config.accessTokenTtlSeconds ??= 3600;
  config.users ??= [];
  config.clients ??= [];

  const users = new Map();
  for (const u of config.users) {
    if (typeof u.username !== 'string' || typeof u.password !== 'string') {
      die(`${file}: every user needs a username and a password`);
    }
    users.set(u.username, {
      username: u.username,
      password: u.password,
      email: u.email,
      name: u.name ?? u.username,
      groups: u.groups ?? [],
    });
  }

  const clients = config.clients.map((c) => {
    if (typeof c.client_id !== 'string') die(`${file}: a client has no client_id`);
    const grantTypes = c.grant_types ?? ['authorization_code'];
    const metadata = {
      client_id: c.client_id,
      grant_types: grantTypes,
      // No authorization_code grant (a device-only client): no response types, no redirects.
      response_types: grantTypes.includes('authorization_code') ? ['code'] : [],
      redirect_uris: c.redirect_uris ?? [],
      post_logout_redirect_uris: c.post_logout_redirect_uris ?? [],
      application_type: c.application_type ?? 'web',
    };
    if (c.client_secret !== undefined) {
      metadata.client_secret = c.client_secret;
      metadata.token_endpoint_auth_method = 'client_secret_basic';
    } else {
      metadata.token_endpoint_auth_method = 'none';
    }
    // Any other key is client metadata as oidc-provider knows it (it overrides the above).
    for (const [key, value] of Object.entries(c)) {
      if (!CLIENT_KEYS_DEFAULTED.has(key)) metadata[key] = value;
    }
    return metadata;
  });

  return { ...config, users, clients };
}

// ---------------------------------------------------------------------------------------
// Storage shared by every Provider instance (one per key set), so a SIGHUP keeps sessions,
// interactions, grants, codes and tokens. An in-memory copy of oidc-provider's own
// development adapter, with expiry.

const store = new Map(); // `${model}:${id}` -> { payload, expiresAt }
const uidIndex = new Map(); // session uid -> session id
const userCodeIndex = new Map(); // device user code -> device code id
const grantIndex = new Map(); // grantId -> Set of `${model}:${id}`
const GRANTABLE = new Set([
  'AccessToken', 'AuthorizationCode', 'RefreshToken', 'DeviceCode', 'BackchannelAuthenticationRequest',
]);

function live(key) {
  const entry = store.get(key);
  if (!entry) return undefined;
  if (entry.expiresAt !== undefined && entry.expiresAt <= Date.now()) {
    store.delete(key);
    return undefined;
  }
  return entry.payload;
}

setInterval(() => {
  for (const key of store.keys()) live(key);
}, 60_000).unref();

class SharedMemoryAdapter {
  constructor(model) {
    this.model = model;
  }

  key(id) {
    return `${this.model}:${id}`;
  }

  async upsert(id, payload, expiresIn) {
    const key = this.key(id);
    const expiresAt = typeof expiresIn === 'number' ? Date.now() + expiresIn * 1000 : undefined;
    if (this.model === 'Session') uidIndex.set(payload.uid, id);
    if (GRANTABLE.has(this.model) && payload.grantId) {
      if (!grantIndex.has(payload.grantId)) grantIndex.set(payload.grantId, new Set());
      grantIndex.get(payload.grantId).add(key);
    }
    if (payload.userCode) userCodeIndex.set(payload.userCode, id);
    store.set(key, { payload, expiresAt });
  }

  async find(id) {
    return live(this.key(id));
  }

  async findByUid(uid) {
    const id = uidIndex.get(uid);
    return id === undefined ? undefined : this.find(id);
  }

  async findByUserCode(userCode) {
    const id = userCodeIndex.get(userCode);
    return id === undefined ? undefined : this.find(id);
  }

  async consume(id) {
    const payload = live(this.key(id));
    if (payload) payload.consumed = Math.floor(Date.now() / 1000);
  }

  async destroy(id) {
    store.delete(this.key(id));
  }

  async revokeByGrantId(grantId) {
    for (const key of grantIndex.get(grantId) ?? []) store.delete(key);
    grantIndex.delete(grantId);
  }
}

// ---------------------------------------------------------------------------------------
// Pages (no external resources: the browser tests run without a network)

function esc(value) {
  return String(value ?? '').replace(/[&<>"']/g, (c) => ({
    '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;',
  })[c]);
}

function page(title, body) {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title>
<style>body{font-family:sans-serif;max-width:24em;margin:3em auto}label,input,button{display:block;margin:.4em 0}.error{color:#b00020}</style>
</head>
<body>
${body}
</body>
</html>
`;
}

function loginPage(details, { login = '', error } = {}) {
  const uid = esc(details.uid);
  return page('Sign in', `<h1>Sign in</h1>
<p id="client">to ${esc(details.params.client_id)}</p>
${error ? `<p id="error" class="error" role="alert">${esc(error)}</p>` : ''}
<form id="login-form" method="post" action="/interaction/${uid}/login" autocomplete="off">
<label for="login">Username</label>
<input id="login" name="login" type="text" value="${esc(login)}" autofocus required>
<label for="password">Password</label>
<input id="password" name="password" type="password" required>
<button id="submit" type="submit">Sign in</button>
</form>
<p><a id="cancel" href="/interaction/${uid}/abort">Cancel</a></p>`);
}

async function userCodeInputSource(ctx, form, out, err) {
  let msg = '<p id="prompt">Enter the code displayed on your device</p>';
  if (err && (err.userCode || err.name === 'NoCodeError')) {
    msg = '<p id="error" class="error" role="alert">The code you entered is incorrect. Try again</p>';
  } else if (err && err.name === 'AbortedError') {
    msg = '<p id="error" class="error" role="alert">The sign-in request was interrupted</p>';
  } else if (err) {
    msg = '<p id="error" class="error" role="alert">There was an error processing your request</p>';
  }
  ctx.type = 'html';
  ctx.body = page('Device sign-in', `<h1>Device sign-in</h1>
${msg}
${form.replace('name="user_code"', 'id="user_code" name="user_code"')}
<button id="submit" type="submit" form="op.deviceInputForm">Continue</button>`);
}

async function userCodeConfirmSource(ctx, form, client, deviceInfo, userCode) {
  ctx.type = 'html';
  ctx.body = page('Confirm device', `<h1>Confirm device</h1>
<p>Client <strong id="client">${esc(client.clientId)}</strong> shows the code
<code id="user-code">${esc(userCode)}</code>.</p>
${form}
<button id="confirm" type="submit" form="op.deviceConfirmForm">Continue</button>
<button id="abort" type="submit" form="op.deviceConfirmForm" name="abort" value="yes">Abort</button>`);
}

async function successSource(ctx) {
  ctx.type = 'html';
  ctx.body = page('Signed in', '<h1 id="success">Sign-in complete</h1><p>You can close this page.</p>');
}

async function logoutSource(ctx, form) {
  ctx.type = 'html';
  ctx.body = page('Sign out', `<h1>Sign out of ${esc(ctx.host)}?</h1>
${form}
<button id="logout" type="submit" form="op.logoutForm" name="logout" value="yes">Sign out</button>
<button id="stay" type="submit" form="op.logoutForm">Stay signed in</button>`);
}

async function postLogoutSuccessSource(ctx) {
  ctx.type = 'html';
  ctx.body = page('Signed out', '<h1 id="logged-out">Signed out</h1>');
}

async function renderError(ctx, out, error) {
  log('error page:', error?.stack ?? error);
  ctx.type = 'html';
  ctx.body = page('Error', `<h1>Error</h1>
<pre id="error">${esc(out.error)}: ${esc(out.error_description)}</pre>`);
}

// ---------------------------------------------------------------------------------------
// The Provider

function scopeSet(scope) {
  return new Set(String(scope ?? '').split(' ').filter(Boolean));
}

// Finds or makes the grant of `accountId` for the interaction's client, with every scope and
// claim the request asked for: consent is automatic.
async function autoGrant(provider, details, accountId) {
  let grant = details.grantId ? await provider.Grant.find(details.grantId) : undefined;
  if (!grant || grant.accountId !== accountId) {
    grant = new provider.Grant({ accountId, clientId: details.params.client_id });
  }
  const scope = [...scopeSet(details.params.scope)].join(' ');
  if (scope) grant.addOIDCScope(scope);
  if (details.params.claims) {
    const claims = JSON.parse(details.params.claims);
    grant.addOIDCClaims([...Object.keys(claims.id_token ?? {}), ...Object.keys(claims.userinfo ?? {})]);
  }
  const missing = details.prompt.details ?? {};
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
    grant.addResourceScope(indicator, scopes.join(' '));
  }
  return grant.save();
}

async function makeProvider(Provider, config, jwks) {
  const { users, cookieKeys } = config;
  const issuer = `http://${config.host}:${config.port}`;
  const provider = new Provider(issuer, {
    adapter: SharedMemoryAdapter,
    clients: config.clients,
    // oidc-provider signs with the first key that fits best: one with alg and use beats one
    // without, so give every RSA key both and the first key in the file is the one that signs.
    jwks: {
      keys: jwks.keys.map((k) => (k.kty === 'RSA' ? { alg: 'RS256', use: 'sig', ...k } : k)),
    },
    // Cookies stay valid across key swaps: the same names and signing keys (per process).
    // SameSite=Lax, not None: Chromium drops None cookies without Secure, and this is http.
    cookies: {
      keys: cookieKeys,
      long: { httpOnly: true, sameSite: 'lax', signed: true },
      short: { httpOnly: true, sameSite: 'lax', signed: true },
    },
    responseTypes: ['code'],
    async findAccount(ctx, sub) {
      const user = users.get(sub);
      if (!user) return undefined;
      return {
        accountId: sub,
        async claims() {
          return {
            sub,
            email: user.email,
            email_verified: user.email !== undefined ? true : undefined,
            preferred_username: user.username,
            name: user.name,
            groups: user.groups,
          };
        },
      };
    },
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['name', 'preferred_username'],
      groups: ['groups'],
    },
    scopes: ['openid', 'offline_access', 'email', 'profile', 'groups'],
    // The scope-requested claims go into the ID token itself (kube-apiserver's OIDC
    // authenticator reads them there), not only into the userinfo response.
    conformIdTokenClaims: false,
    // Consent is automatic: a grant with everything requested, for silent re-authorizations too.
    async loadExistingGrant(ctx) {
      const { oidc } = ctx;
      const grantId = oidc.result?.consent?.grantId || oidc.session.grantIdFor(oidc.client.clientId);
      let grant = grantId ? await oidc.provider.Grant.find(grantId) : undefined;
      if (grant && grant.accountId !== oidc.account.accountId) grant = undefined;
      grant ??= new oidc.provider.Grant({ accountId: oidc.account.accountId, clientId: oidc.client.clientId });
      const scope = [...oidc.requestParamOIDCScopes].join(' ');
      if (scope) grant.addOIDCScope(scope);
      if (oidc.requestParamClaims.size) grant.addOIDCClaims([...oidc.requestParamClaims]);
      await grant.save();
      return grant;
    },
    async issueRefreshToken(ctx, client, code) {
      return client.grantTypeAllowed('refresh_token') && code.scopes.has('offline_access');
    },
    pkce: {
      methods: ['S256'],
      required: (ctx, client) => client.clientAuthMethod === 'none',
    },
    clientBasedCORS: () => true,
    ttl: {
      AccessToken: config.accessTokenTtlSeconds,
      AuthorizationCode: 60,
      DeviceCode: 600,
      Grant: 14 * 24 * 3600,
      IdToken: config.idTokenTtlSeconds,
      Interaction: 3600,
      RefreshToken: 14 * 24 * 3600,
      Session: 14 * 24 * 3600,
    },
    features: {
      devInteractions: { enabled: false },
      deviceFlow: { enabled: true, userCodeInputSource, userCodeConfirmSource, successSource },
      revocation: { enabled: true },
      rpInitiatedLogout: { enabled: true, logoutSource, postLogoutSuccessSource },
    },
    renderError,
  });

  // OIDC Core makes an OP ignore offline_access at the authorization endpoint unless prompt
  // has consent. Consent is automatic here, so ask for it on the client's behalf: a client
  // that requests offline_access gets its refresh token, as from Dex or Keycloak.
  provider.use(async (ctx, next) => {
    if (ctx.method === 'GET' && ctx.path === '/auth') {
      const { scope, prompt } = ctx.query;
      if (scopeSet(scope).has('offline_access')) {
        const prompts = scopeSet(prompt);
        if (!prompts.has('none') && !prompts.has('consent')) {
          ctx.query = { ...ctx.query, prompt: [...prompts, 'consent'].join(' ') };
        }
      }
    }
    await next();
  });

  for (const event of [
    'server_error', 'authorization.error', 'grant.error', 'end_session.error', 'userinfo.error',
    'revocation.error', 'jwks.error', 'discovery.error', 'code_verification.error',
    'device_authorization.error',
  ]) {
    provider.on(event, (ctx, err) => {
      log(`${event}:`, err?.error ?? '', err?.error_description ?? '', event === 'server_error' ? err?.stack : '');
    });
  }

  const koa = provider.callback();
  return {
    provider,
    async handle(req, res) {
      const url = new URL(req.url, issuer);
      const m = url.pathname.match(/^\/interaction\/([^/]+)(?:\/(login|abort))?$/);
      if (m) {
        await interaction(provider, users, req, res, m[2] ?? 'show');
        return;
      }
      koa(req, res);
    },
  };
}

function readForm(req) {
  return new Promise((resolve, reject) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => {
      body += chunk;
      if (body.length > 65536) reject(new Error('form too large'));
    });
    req.on('end', () => resolve(new URLSearchParams(body)));
    req.on('error', reject);
  });
}

function sendHtml(res, status, html) {
  res.statusCode = status;
  res.setHeader('Content-Type', 'text/html; charset=utf-8');
  res.setHeader('Cache-Control', 'no-store');
  res.end(html);
}

// The interaction routes: GET /interaction/UID (the login page; a consent prompt is granted
// at once), POST /interaction/UID/login (fields `login`, `password`), GET /interaction/UID/abort.
async function interaction(provider, users, req, res, action) {
  try {
    const details = await provider.interactionDetails(req, res);
    const { prompt } = details;
    if (action === 'abort') {
      await provider.interactionFinished(req, res, {
        error: 'access_denied', error_description: 'End-User aborted interaction',
      }, { mergeWithLastSubmission: false });
      return;
    }
    if (action === 'show' && req.method === 'GET') {
      if (prompt.name === 'login') {
        sendHtml(res, 200, loginPage(details, { login: details.params.login_hint ?? '' }));
        return;
      }
      if (prompt.name === 'consent') {
        const grantId = await autoGrant(provider, details, details.session.accountId);
        await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
        return;
      }
      sendHtml(res, 400, page('Error', `<pre id="error">unknown prompt ${esc(prompt.name)}</pre>`));
      return;
    }
    if (action === 'login' && req.method === 'POST') {
      const form = await readForm(req);
      const login = form.get('login') ?? '';
      const user = users.get(login);
      if (!user || user.password !== (form.get('password') ?? '')) {
        log(`login refused for "${login}"`);
        sendHtml(res, 200, loginPage(details, { login, error: 'Invalid username or password.' }));
        return;
      }
      const grantId = await autoGrant(provider, details, login);
      log(`login of "${login}" for ${details.params.client_id}`);
      await provider.interactionFinished(req, res, {
        login: { accountId: login },
        consent: { grantId },
      }, { mergeWithLastSubmission: false });
      return;
    }
    sendHtml(res, 405, page('Error', '<pre id="error">method not allowed</pre>'));
  } catch (err) {
    log('interaction failed:', err?.stack ?? err);
    if (!res.headersSent) {
      sendHtml(res, 400, page('Error', `<h1>Error</h1><pre id="error">${esc(err.name)}: ${esc(err.error_description ?? err.message)}</pre>`));
    }
  }
}

// ---------------------------------------------------------------------------------------
// Main

async function serve(configFile) {
  const config = readConfig(configFile);
  let jwks;
  try {
    jwks = loadOrCreateKeys(config.keysFile);
  } catch (err) {
    die(err.message);
  }
  const { default: Provider } = await import('oidc-provider');

  let current;
  const server = http.createServer((req, res) => {
    const started = Date.now();
    res.on('finish', () => log(`${req.method} ${req.url.split('?')[0]} ${res.statusCode} ${Date.now() - started}ms`));
    current.handle(req, res).catch((err) => {
      log('request failed:', err?.stack ?? err);
      if (!res.headersSent) {
        res.statusCode = 500;
        res.end('internal error');
      }
    });
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, resolve);
  }).catch((err) => die(`cannot listen on ${config.host}:${config.port}: ${err.message}`));
  config.port = server.address().port;
  config.cookieKeys = [crypto.randomBytes(32).toString('base64url')];
  try {
    current = await makeProvider(Provider, config, jwks);
  } catch (err) {
    die(`cannot start the provider: ${err.stack ?? err}`);
  }
  log(`serving ${current.provider.issuer}; signing key ${jwks.keys[0].kid}`);

  let reloading = Promise.resolve();
  process.on('SIGHUP', () => {
    reloading = reloading.then(async () => {
      try {
        const keys = readKeys(config.keysFile);
        current = await makeProvider(Provider, config, keys);
        log(`keys reloaded from ${config.keysFile}; signing key ${keys.keys[0].kid}; all: ${keys.keys.map((k) => k.kid).join(' ')}`);
      } catch (err) {
        log(`SIGHUP: keeping the old keys: ${err.message}`);
      }
    });
  });

  let stopping = false;
  const stop = (why) => {
    if (stopping) return;
    stopping = true;
    log(`${why}: exiting`);
    server.close(() => process.exit(0));
    server.closeAllConnections();
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  const watch = Number(process.env.WEFT_OIDC_WATCH_PID || 0);
  if (watch) {
    setInterval(() => {
      try {
        process.kill(watch, 0);
      } catch {
        stop(`process ${watch} is gone`);
      }
    }, 500).unref();
  }

  process.stdout.write(`ready ${current.provider.issuer}\n`);
}

const args = process.argv.slice(2);
if (args[0] === '--rotate' && args.length === 2) {
  try {
    rotate(args[1]);
  } catch (err) {
    die(err.message);
  }
} else if (args.length === 1 && !args[0].startsWith('-')) {
  await serve(args[0]);
} else {
  die('usage: node provider.mjs CONFIG.json | node provider.mjs --rotate KEYSFILE');
}
