/**
 * The browser's session cookie, `sb_session`: what login and sign-up set when asked with
 * `cookie: true` (the web console's way to hold a session no script in the page can read), what
 * logout and a refused cookie clear, and the check that a request presenting it comes from the
 * service's own origin.
 *
 * The cookie is `HttpOnly` (no script reads it), `SameSite=Strict` (a browser sends it only on
 * requests a page of this site makes), `Path=/`, with `Max-Age` the session's lifetime, and
 * `Secure` when the request came over HTTPS (Koa's `ctx.secure`, which believes
 * `X-Forwarded-Proto` only when `TRUST_PROXY` is set). SameSite alone does not stop another origin
 * of the same site (`other.example.com` against `sb.example.com`), so a request authenticated by
 * the cookie must also show that it comes from this very origin: `Sec-Fetch-Site: same-origin`
 * (what every current browser sends, EventSource included), or else an `Origin` header equal to
 * the request's own origin (its scheme and `Host`, or `X-Forwarded-Proto` and `X-Forwarded-Host`
 * behind a trusted proxy). Anything else is 403 `csrf_refused` (http/auth.ts).
 */
import type { Context } from 'koa';

export const SESSION_COOKIE = 'sb_session';

/** A session token as the cookie may hold it (domain/credentials.ts mints `ses_` and 43 URL-safe characters). */
const SESSION_TOKEN = /^ses_[A-Za-z0-9_-]{1,200}$/;

/** The `Set-Cookie` value that hands `token` to the browser for `maxAgeSeconds`. */
export function sessionCookie(token: string, maxAgeSeconds: number, secure: boolean): string {
  return `${SESSION_COOKIE}=${token}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${maxAgeSeconds}${secure ? '; Secure' : ''}`;
}

/** The `Set-Cookie` value that makes the browser forget the cookie. */
export function clearedSessionCookie(secure: boolean): string {
  return sessionCookie('', 0, secure);
}

/**
 * The `sb_session` cookie's value, if the request sends one: '' for a cookie that cannot be a
 * session token (it is then refused as one naming no session would be). The first of several
 * wins, as in browsers' own order (longest path first; every one of ours has `Path=/`).
 */
export function sessionCookieOf(ctx: Context): string | undefined {
  const header = ctx.get('Cookie');
  if (!header.includes(SESSION_COOKIE)) return undefined;
  for (const pair of header.split(';')) {
    const at = pair.indexOf('=');
    if (at < 0 || pair.slice(0, at).trim() !== SESSION_COOKIE) continue;
    const value = pair.slice(at + 1).trim();
    return SESSION_TOKEN.test(value) ? value : '';
  }
  return undefined;
}

/** Whether the request comes from a page of the service's own origin (see the top of this file). */
export function fromOwnOrigin(ctx: Context): boolean {
  if (ctx.get('Sec-Fetch-Site') === 'same-origin') return true;
  const origin = ctx.get('Origin');
  return origin !== '' && origin !== 'null' && origin === requestOrigin(ctx);
}

/**
 * `scheme://host[:port]` of the request as the browser addressed it (Koa 3's `ctx.origin` is the
 * `Origin` header itself), in the form a browser writes an `Origin`: lower case, no default port.
 */
export function requestOrigin(ctx: Context): string | undefined {
  try {
    return new URL(`${ctx.protocol}://${ctx.host}`).origin;
  } catch {
    return undefined;
  }
}
