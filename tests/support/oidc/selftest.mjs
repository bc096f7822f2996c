// Self-test of provider.mjs: starts it on loopback and drives every flow Weft's tests use,
// by plain HTTP (fetch, redirects followed by hand, a cookie jar per "browser"):
// discovery; authorization code + PKCE through the login form (a wrong password first);
// the ID token's claims checked against the JWKS with jose; the native client's loopback
// redirect on any port; a confidential client; PKCE refused when missing; refresh; the
// device flow; key rotation (--rotate + SIGHUP) with the old tokens still verifying and
// the session kept; RP-initiated logout; SIGTERM.
//
//   node selftest.mjs        (in tests/support/oidc, after `bash ../oidc.sh install`)
//
// Prints `ok - ...` per check and `N passed, N failed` last; exits non-zero on a failure.

import { spawn, execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as jose from 'jose';

const here = path.dirname(fileURLToPath(import.meta.url));
const providerJs = path.join(here, 'provider.mjs');
let passed = 0;
let failed = 0;

function check(name, cond, detail) {
  if (cond) {
    passed += 1;
    console.log(`ok - ${name}`);
  } else {
    failed += 1;
    console.log(`not ok - ${name}${detail === undefined ? '' : `: ${typeof detail === 'string' ? detail : JSON.stringify(detail)}`}`);
  }
}

function must(cond, what) {
  if (!cond) throw new Error(what);
}

// A browser's cookie jar, enough for one host: names and paths, deletions.
class Jar {
  cookies = new Map(); // `${path}\t${name}` -> { name, value, path }

  take(url, res) {
    for (const line of res.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(';').map((s) => s.trim());
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq);
      const value = pair.slice(eq + 1);
      let cpath = '/';
      let expired = false;
      for (const attr of attrs) {
        const [k, v = ''] = attr.split('=');
        if (k.toLowerCase() === 'path') cpath = v;
        if (k.toLowerCase() === 'expires' && Date.parse(v) <= Date.now()) expired = true;
        if (k.toLowerCase() === 'max-age' && Number(v) <= 0) expired = true;
      }
      const key = `${cpath}\t${name}`;
      if (expired || value === '') this.cookies.delete(key);
      else this.cookies.set(key, { name, value, path: cpath });
    }
  }

  header(url) {
    const p = new URL(url).pathname;
    return [...this.cookies.values()]
      .filter((c) => p === c.path || p.startsWith(c.path.endsWith('/') ? c.path : `${c.path}/`))
      .map((c) => `${c.name}=${c.value}`)
      .join('; ');
  }

  async fetch(url, { method = 'GET', form, headers = {} } = {}) {
    const h = { ...headers };
    const cookie = this.header(url);
    if (cookie) h.cookie = cookie;
    let body;
    if (form) {
      body = new URLSearchParams(form).toString();
      h['content-type'] = 'application/x-www-form-urlencoded';
    }
    const res = await fetch(url, { method, headers: h, body, redirect: 'manual' });
    this.take(url, res);
    const text = await res.text();
    const location = res.headers.get('location');
    return { status: res.status, text, location: location && new URL(location, url).href, headers: res.headers };
  }

  // GETs url and follows redirects until a page (2xx) or a URL outside the provider.
  async follow(url, issuer) {
    let res = await this.fetch(url);
    for (let i = 0; i < 10 && res.location && res.location.startsWith(issuer); i += 1) {
      res = await this.fetch(res.location);
    }
    return res;
  }
}

function formField(html, name) {
  const m = html.match(new RegExp(`name="${name}"[^>]*value="([^"]*)"`)) ?? html.match(new RegExp(`value="([^"]*)"[^>]*name="${name}"`));
  return m?.[1];
}

function formAction(html, id) {
  const m = html.match(new RegExp(`<form id="${id.replace('.', '\\.')}"[^>]*action="([^"]*)"`));
  return m?.[1];
}

async function postForm(url, form, auth) {
  const headers = { 'content-type': 'application/x-www-form-urlencoded' };
  if (auth) headers.authorization = `Basic ${Buffer.from(`${auth[0]}:${auth[1]}`).toString('base64')}`;
  const res = await fetch(url, { method: 'POST', headers, body: new URLSearchParams(form).toString() });
  return { status: res.status, json: await res.json() };
}

function pkce() {
  const verifier = crypto.randomBytes(32).toString('base64url');
  const challenge = crypto.createHash('sha256').update(verifier).digest('base64url');
  return { verifier, challenge };
}

// Starts the provider; resolves with { child, issuer, stderr() }.
function startProvider(configFile) {
  const child = spawn(process.execPath, [providerJs, configFile], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d) => {
    err += d;
    if (process.env.SELFTEST_VERBOSE) process.stderr.write(d);
  });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (d) => {
      out += d;
      const line = out.split('\n')[0];
      if (out.includes('\n')) {
        if (!line.startsWith('ready ')) reject(new Error(`first stdout line: ${line}`));
        resolve({ child, issuer: line.slice('ready '.length), stderr: () => err, stdout: () => out });
      }
    });
    child.on('exit', (code) => reject(new Error(`provider exited (${code}) before ready: ${err}`)));
  });
}

// An authorization code flow in `jar`: returns the redirect's URL (the client's callback).
async function authorize(jar, meta, params, login) {
  const url = new URL(meta.authorization_endpoint);
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  let res = await jar.follow(url.href, meta.issuer);
  if (login) {
    must(res.status === 200 && res.text.includes('id="login"'), `no login page: ${res.status} ${res.text.slice(0, 300)}`);
    const action = new URL(formAction(res.text, 'login-form'), meta.issuer).href;
    res = await jar.fetch(action, { method: 'POST', form: login });
    if (res.status === 200) return { page: res };
    res = await jar.follow(res.location, meta.issuer);
  }
  return { callback: res.location, page: res };
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'weft-oidc-selftest-'));
  const keysFile = path.join(dir, 'keys.json');
  const cb = 'http://127.0.0.1:45678/callback';
  const config = {
    port: 0,
    keysFile,
    idTokenTtlSeconds: 600,
    users: [
      { username: 'alice', password: 'wonderland', email: 'alice@example.com', groups: ['weft-admins', 'dev'] },
      { username: 'bob', password: 'builder', email: 'bob@example.com', groups: [] },
    ],
    clients: [
      {
        client_id: 'weft-console', redirect_uris: [cb], grant_types: ['authorization_code', 'refresh_token'],
        application_type: 'web', post_logout_redirect_uris: ['http://127.0.0.1:45678/logged-out'],
      },
      {
        client_id: 'weft-cli', application_type: 'native', redirect_uris: ['http://127.0.0.1/callback'],
        grant_types: ['authorization_code', 'refresh_token', 'urn:ietf:params:oauth:grant-type:device_code'],
      },
      {
        client_id: 'weft-server', client_secret: 'a-long-enough-client-secret-for-tests',
        redirect_uris: ['http://127.0.0.1:45679/cb'], grant_types: ['authorization_code'],
      },
    ],
  };
  const configFile = path.join(dir, 'config.json');
  fs.writeFileSync(configFile, JSON.stringify(config, null, 2));

  const p = await startProvider(configFile);
  try {
    check('prints exactly `ready ISSUER` on stdout', /^ready http:\/\/127\.0\.0\.1:\d+\n$/.test(p.stdout()), p.stdout());
    check('keysFile created with one RS256 key', JSON.parse(fs.readFileSync(keysFile, 'utf8')).keys.length === 1);

    // Discovery
    const meta = await (await fetch(`${p.issuer}/.well-known/openid-configuration`)).json();
    check('discovery: issuer', meta.issuer === p.issuer, meta.issuer);
    check('discovery: device, end_session, jwks', !!(meta.device_authorization_endpoint && meta.end_session_endpoint && meta.jwks_uri));
    check('discovery: groups scope, S256', meta.scopes_supported.includes('groups') && meta.code_challenge_methods_supported.includes('S256'));
    const jwks = jose.createRemoteJWKSet(new URL(meta.jwks_uri), { cooldownDuration: 0, cacheMaxAge: 0 });
    const verify = (token, aud) => jose.jwtVerify(token, jwks, { issuer: meta.issuer, audience: aud });

    // Authorization code + PKCE through the login form, a wrong password first.
    const browser = new Jar();
    const { verifier, challenge } = pkce();
    const state = crypto.randomBytes(8).toString('hex');
    const nonce = crypto.randomBytes(8).toString('hex');
    const params = {
      client_id: 'weft-console', response_type: 'code', redirect_uri: cb,
      scope: 'openid email profile groups offline_access', state, nonce,
      code_challenge: challenge, code_challenge_method: 'S256',
    };
    const wrong = await authorize(browser, meta, params, { login: 'alice', password: 'nope' });
    check('wrong password: the login page again with an error', wrong.page?.status === 200
      && wrong.page.text.includes('id="error"') && wrong.page.text.includes('Invalid username or password'));
    const action = new URL(formAction(wrong.page.text, 'login-form'), meta.issuer).href;
    let res = await browser.fetch(action, { method: 'POST', form: { login: 'alice', password: 'wonderland' } });
    res = await browser.follow(res.location, meta.issuer);
    const back = new URL(res.location);
    check('login: redirected to the client with code and state',
      back.href.startsWith(cb) && back.searchParams.get('code') && back.searchParams.get('state') === state, res.location);
    let tok = await postForm(meta.token_endpoint, {
      grant_type: 'authorization_code', code: back.searchParams.get('code'), redirect_uri: cb,
      client_id: 'weft-console', code_verifier: verifier,
    });
    check('code exchange: id_token, access_token, refresh_token',
      tok.status === 200 && tok.json.id_token && tok.json.access_token && tok.json.refresh_token, tok.json);
    const first = await verify(tok.json.id_token, 'weft-console');
    const c = first.payload;
    check('id_token verifies against the JWKS (RS256)', first.protectedHeader.alg === 'RS256');
    check('id_token claims: sub, email, preferred_username, name, nonce',
      c.sub === 'alice' && c.email === 'alice@example.com' && c.email_verified === true
      && c.preferred_username === 'alice' && c.name === 'alice' && c.nonce === nonce, c);
    check('id_token claims: groups', JSON.stringify(c.groups) === '["weft-admins","dev"]', c.groups);
    const firstIdToken = tok.json.id_token;
    const oldKid = first.protectedHeader.kid;
    const ui = await (await fetch(meta.userinfo_endpoint, { headers: { authorization: `Bearer ${tok.json.access_token}` } })).json();
    check('userinfo answers for the access token', ui.sub === 'alice' && ui.groups?.length === 2, ui);

    // Refresh: a new id_token; a public client's refresh token rotates.
    const refreshed = await postForm(meta.token_endpoint, {
      grant_type: 'refresh_token', refresh_token: tok.json.refresh_token, client_id: 'weft-console',
    });
    check('refresh: an id_token and a new refresh_token', refreshed.status === 200 && refreshed.json.id_token
      && refreshed.json.refresh_token && refreshed.json.refresh_token !== tok.json.refresh_token, refreshed.json);
    const r = (await verify(refreshed.json.id_token, 'weft-console')).payload;
    check('refreshed id_token: same claims, groups', r.sub === 'alice' && r.groups?.length === 2 && r.email === 'alice@example.com', r);
    let consoleRefresh = refreshed.json.refresh_token;

    // Without offline_access: no refresh token.
    const noOffline = pkce();
    const n = await authorize(browser, meta, { ...params, scope: 'openid groups', code_challenge: noOffline.challenge });
    const nCode = new URL(n.callback).searchParams.get('code');
    tok = await postForm(meta.token_endpoint, {
      grant_type: 'authorization_code', code: nCode, redirect_uri: cb, client_id: 'weft-console', code_verifier: noOffline.verifier,
    });
    check('second login in the same browser: no login page (session), no refresh_token without offline_access',
      tok.status === 200 && tok.json.id_token && !tok.json.refresh_token, tok.json);

    // PKCE is required for a public client.
    const noPkce = { ...params };
    delete noPkce.code_challenge;
    delete noPkce.code_challenge_method;
    const np = await authorize(new Jar(), meta, noPkce);
    const npUrl = np.callback && new URL(np.callback);
    check('public client without PKCE: invalid_request', npUrl?.searchParams.get('error') === 'invalid_request', np.callback ?? np.page.text.slice(0, 300));

    // Confidential client, no PKCE, client_secret_basic.
    const srv = new Jar();
    const s = await authorize(srv, meta, {
      client_id: 'weft-server', response_type: 'code', redirect_uri: 'http://127.0.0.1:45679/cb', scope: 'openid profile',
    }, { login: 'bob', password: 'builder' });
    tok = await postForm(meta.token_endpoint, {
      grant_type: 'authorization_code', code: new URL(s.callback).searchParams.get('code'), redirect_uri: 'http://127.0.0.1:45679/cb',
    }, ['weft-server', 'a-long-enough-client-secret-for-tests']);
    const sc = tok.json.id_token && (await verify(tok.json.id_token, 'weft-server')).payload;
    check('confidential client: code exchange with client_secret_basic', sc?.sub === 'bob' && sc.preferred_username === 'bob' && sc.groups === undefined, tok.json);

    // The CLI: native client, loopback redirect on a port of its own.
    const cli = new Jar();
    const cp = pkce();
    const loopback = 'http://127.0.0.1:51515/callback';
    const l = await authorize(cli, meta, {
      client_id: 'weft-cli', response_type: 'code', redirect_uri: loopback, scope: 'openid email groups offline_access',
      state: 'cli', code_challenge: cp.challenge, code_challenge_method: 'S256',
    }, { login: 'alice', password: 'wonderland' });
    check('native client: loopback redirect on any port', l.callback?.startsWith(`${loopback}?`), l.callback ?? l.page.text.slice(0, 300));
    tok = await postForm(meta.token_endpoint, {
      grant_type: 'authorization_code', code: new URL(l.callback).searchParams.get('code'), redirect_uri: loopback,
      client_id: 'weft-cli', code_verifier: cp.verifier,
    });
    check('native client: tokens with a refresh_token', tok.json.id_token && tok.json.refresh_token, tok.json);
    // A public client's refresh token is single-use; using one twice revokes the whole grant.
    const rt1 = await postForm(meta.token_endpoint, { grant_type: 'refresh_token', refresh_token: tok.json.refresh_token, client_id: 'weft-cli' });
    const reuse = await postForm(meta.token_endpoint, { grant_type: 'refresh_token', refresh_token: tok.json.refresh_token, client_id: 'weft-cli' });
    check('a used refresh token is refused', rt1.status === 200 && reuse.status === 400 && reuse.json.error === 'invalid_grant', reuse.json);
    const rt2 = await postForm(meta.token_endpoint, { grant_type: 'refresh_token', refresh_token: rt1.json.refresh_token, client_id: 'weft-cli' });
    check('... and that revoked the grant: its successor token is refused too', rt2.status === 400 && rt2.json.error === 'invalid_grant', rt2.json);
    const cp2 = pkce();
    const l2 = await authorize(cli, meta, {
      client_id: 'weft-cli', response_type: 'code', redirect_uri: loopback, scope: 'openid groups',
      code_challenge: cp2.challenge, code_challenge_method: 'S256',
    });
    check('native client, second login: consent granted without a page', l2.callback?.includes('code='), l2.callback ?? l2.page.text.slice(0, 300));

    // Device flow, completed by HTTP.
    const da = await postForm(meta.device_authorization_endpoint, { client_id: 'weft-cli', scope: 'openid email profile groups offline_access' });
    check('device authorization: device_code, user_code, verification_uri',
      da.status === 200 && da.json.device_code && da.json.user_code && da.json.verification_uri === `${meta.issuer}/device`, da.json);
    const pending = await postForm(meta.token_endpoint, {
      grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: da.json.device_code, client_id: 'weft-cli',
    });
    check('device token before the user: authorization_pending', pending.json.error === 'authorization_pending', pending.json);
    const phone = new Jar();
    res = await phone.fetch(da.json.verification_uri);
    check('device page: a form with xsrf and user_code', res.status === 200 && res.text.includes('id="user_code"'));
    const device = new URL(formAction(res.text, 'op.deviceInputForm'), meta.issuer).href;
    const bad = await phone.fetch(device, { method: 'POST', form: { xsrf: formField(res.text, 'xsrf'), user_code: 'BCDF-GHJK' } });
    check('device page: a wrong user code is refused', bad.status === 200 && bad.text.includes('id="error"'));
    res = await phone.fetch(device, { method: 'POST', form: { xsrf: formField(bad.text, 'xsrf'), user_code: da.json.user_code } });
    check('device page: the confirmation page', res.status === 200 && res.text.includes('id="confirm"'), res.text.slice(0, 300));
    res = await phone.fetch(device, {
      method: 'POST',
      form: { xsrf: formField(res.text, 'xsrf'), user_code: formField(res.text, 'user_code'), confirm: 'yes' },
    });
    res = await phone.follow(res.location, meta.issuer);
    check('device flow: the login page', res.status === 200 && res.text.includes('id="password"'), res.text.slice(0, 300));
    res = await phone.fetch(new URL(formAction(res.text, 'login-form'), meta.issuer).href, {
      method: 'POST', form: { login: 'alice', password: 'wonderland' },
    });
    res = await phone.follow(res.location, meta.issuer);
    check('device flow: the success page', res.status === 200 && res.text.includes('id="success"'), res.text.slice(0, 300));
    tok = await postForm(meta.token_endpoint, {
      grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: da.json.device_code, client_id: 'weft-cli',
    });
    const dc = tok.json.id_token && (await verify(tok.json.id_token, 'weft-cli')).payload;
    check('device flow: tokens, id_token with groups', dc?.sub === 'alice' && dc.groups?.length === 2 && !!tok.json.refresh_token, tok.json);
    const deviceRefresh = tok.json.refresh_token;

    // Key rotation: --rotate, SIGHUP, the new kid signs, the old tokens still verify.
    const newKid = execFileSync(process.execPath, [providerJs, '--rotate', keysFile], { encoding: 'utf8' }).trim();
    const keys = JSON.parse(fs.readFileSync(keysFile, 'utf8')).keys;
    check('--rotate prints the new kid and prepends its key', keys.length === 2 && keys[0].kid === newKid && keys[1].kid === oldKid);
    process.kill(p.child.pid, 'SIGHUP');
    let published = [];
    for (let i = 0; i < 100 && !published.includes(newKid); i += 1) {
      await new Promise((ok) => { setTimeout(ok, 50); });
      published = (await (await fetch(meta.jwks_uri)).json()).keys.map((k) => k.kid);
    }
    check('after SIGHUP the JWKS lists the new and the old key', published[0] === newKid && published.includes(oldKid), published);
    check('the JWKS holds no private parts', !(await (await fetch(meta.jwks_uri)).json()).keys.some((k) => k.d || k.p));
    const rot = await postForm(meta.token_endpoint, { grant_type: 'refresh_token', refresh_token: consoleRefresh, client_id: 'weft-console' });
    check('refresh after rotation works (grants survive the swap)', rot.status === 200 && rot.json.id_token, rot.json);
    consoleRefresh = rot.json.refresh_token;
    const rv = await verify(rot.json.id_token, 'weft-console');
    check('the new key signs', rv.protectedHeader.kid === newKid, rv.protectedHeader);
    const fresh = jose.createLocalJWKSet(await (await fetch(meta.jwks_uri)).json());
    const old = await jose.jwtVerify(firstIdToken, fresh, { issuer: meta.issuer, audience: 'weft-console' });
    check('an ID token of the old key still verifies with the new JWKS', old.protectedHeader.kid === oldKid);
    const dr = await postForm(meta.token_endpoint, { grant_type: 'refresh_token', refresh_token: deviceRefresh, client_id: 'weft-cli' });
    check('device client refresh after rotation', dr.status === 200 && (await verify(dr.json.id_token, 'weft-cli')).protectedHeader.kid === newKid, dr.json);
    const again = pkce();
    const a = await authorize(browser, meta, { ...params, scope: 'openid groups', code_challenge: again.challenge });
    check('the browser session survives the swap (no login page)', a.callback?.includes('code='), a.callback ?? a.page.text.slice(0, 200));

    // RP-initiated logout.
    const endUrl = new URL(meta.end_session_endpoint);
    endUrl.searchParams.set('id_token_hint', rot.json.id_token);
    endUrl.searchParams.set('post_logout_redirect_uri', 'http://127.0.0.1:45678/logged-out');
    endUrl.searchParams.set('state', 'bye');
    res = await browser.fetch(endUrl.href);
    check('logout page with a form', res.status === 200 && res.text.includes('id="logout"'), res.text.slice(0, 300));
    res = await browser.fetch(new URL(formAction(res.text, 'op.logoutForm'), meta.issuer).href, {
      method: 'POST', form: { xsrf: formField(res.text, 'xsrf'), logout: 'yes' },
    });
    check('logout: redirected to post_logout_redirect_uri with state',
      res.status === 303 && res.location === 'http://127.0.0.1:45678/logged-out?state=bye', `${res.status} ${res.location}`);
    const after = pkce();
    const al = await authorize(browser, meta, { ...params, code_challenge: after.challenge });
    check('after logout the login page is shown again', al.page?.status === 200 && al.page.text.includes('id="login"'));

    // SIGTERM
    const exited = new Promise((ok) => { p.child.on('exit', (code, signal) => ok({ code, signal })); });
    p.child.kill('SIGTERM');
    const e = await exited;
    check('SIGTERM: exits 0', e.code === 0, e);
    check('stdout had the one ready line only', p.stdout().trim().split('\n').length === 1, p.stdout());
  } catch (err) {
    failed += 1;
    console.log(`not ok - ${err.stack}`);
    console.log('# provider stderr:\n' + p.stderr().split('\n').slice(-40).map((l) => `# ${l}`).join('\n'));
  } finally {
    if (p.child.exitCode === null) p.child.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

await main();
