/**
 * The browser's session cookie: what login and sign-up set when asked with `cookie: true` (the web
 * console's way to hold a session no script in the page can read), what logout and a refused
 * cookie clear, and the check that a request presenting it comes from the service's own origin.
 *
 * The cookie is `HttpOnly` (no script reads it), `SameSite=Strict` (a browser sends it only on
 * requests a page of this site makes), `Path=/`, with `Max-Age` the session's lifetime, and
 * `Secure` when the request came over HTTPS (Koa's `ctx.secure`, which believes
 * `X-Forwarded-Proto` only when `TRUST_PROXY` is set).
 *
 * Cookies are shared by every origin of a host, whatever its port or scheme, so a page on another
 * port can set one beside ours, with a longer `Path` that browsers send first ("cookie tossing").
 * Two defences. Over HTTPS (`ctx.secure`, the same fact that makes the cookie `Secure`) the cookie
 * is `__Host-sb_session`, a name browsers accept only with `Secure`, `Path=/` and no `Domain`, and
 * only from a secure origin; only that name is read there, so a plain `sb_session`, which any http
 * origin of the host can set, is ignored rather than refused (refusing would let such a page sign
 * the console out at will). And a request carrying the name read more than once is refused (401,
 * http/auth.ts): which one is ours cannot be told. Over plain HTTP the name is `sb_session` and
 * only the second defence holds. Neither stops an origin of the same host from replacing the
 * cookie outright (same name and path; over HTTPS, an https origin on another port): cookies do
 * not separate ports, so nothing untrusted belongs on the service's host.
 *
 * SameSite alone does not stop another origin of the same site (`other.example.com` against
 * `sb.example.com`), so a request authenticated by the cookie must also show that it comes from
 * this very origin: `Sec-Fetch-Site: same-origin` (what every current browser sends, EventSource
 * included), or else an `Origin` header equal to the request's own origin (its scheme and `Host`,
 * or `X-Forwarded-Proto` and `X-Forwarded-Host` behind a trusted proxy). Anything else is 403
 * `csrf_refused` (http/auth.ts).
 */
import type { Context } from 'koa';

/**
 * The session cookie's name for a request over HTTPS (`secure`, Koa's `ctx.secure`) or not: the one
 * place that decides it, for the cookie set, cleared and read alike.
 */
export function sessionCookieName(secure: boolean): string {
  return secure ? '__Host-sb_session' : 'sb_session';
}

/** A session token as the cookie may hold it (domain/credentials.ts mints `ses_` and 43 URL-safe characters). */
const SESSION_TOKEN = /^ses_[A-Za-z0-9_-]{1,200}$/;

/** The `Set-Cookie` value that hands `token` to the browser for `maxAgeSeconds`. */
export function sessionCookie(token: string, maxAgeSeconds: number, secure: boolean): string {
  return `${sessionCookieName(secure)}=${token}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${maxAgeSeconds}${secure ? '; Secure' : ''}`;
}

/** The `Set-Cookie` value that makes the browser forget the cookie. */
export function clearedSessionCookie(secure: boolean): string {
  return sessionCookie('', 0, secure);
}

/** What `sessionCookieOf` answers for a request that sends the session cookie more than once. */
export const SEVERAL_SESSION_COOKIES = Symbol('several session cookies');

/**
 * The session cookie's value, if the request sends it under the name its scheme reads
 * (`sessionCookieName`): '' for a value that cannot be a session token (it is then refused as one
 * naming no session would be), SEVERAL_SESSION_COOKIES when the name comes more than once, whatever
 * the values: all but one were set by someone else, and which one is ours cannot be told.
 */
export function sessionCookieOf(ctx: Context): string | typeof SEVERAL_SESSION_COOKIES | undefined {
  const name = sessionCookieName(ctx.secure);
  const header = ctx.get('Cookie');
  if (!header.includes(name)) return undefined;
  let found: string | undefined;
  for (const pair of header.split(';')) {
    const at = pair.indexOf('=');
    if (at < 0 || pair.slice(0, at).trim() !== name) continue;
    if (found !== undefined) return SEVERAL_SESSION_COOKIES;
    const value = pair.slice(at + 1).trim();
    found = SESSION_TOKEN.test(value) ? value : '';
  }
  return found;
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
