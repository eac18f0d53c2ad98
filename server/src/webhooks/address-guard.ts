/**
 * Which addresses a webhook may reach: the rule that keeps an endpoint a member typed from becoming
 * a way into the operator's network (SSRF, OWASP API7:2023).
 *
 * - Only `https`, unless `WEBHOOK_ALLOW_HTTP`.
 * - Only public unicast addresses, unless `WEBHOOK_ALLOW_PRIVATE`: ipaddr.js names every special
 *   range (loopback, private, link-local, carrier-grade NAT, multicast, unique-local, broadcast,
 *   unspecified, documentation, benchmarking, 6to4, Teredo, NAT64, …) and only `unicast` passes;
 *   an IPv4-mapped IPv6 address is judged as the IPv4 address it carries, and the deprecated
 *   IPv4-compatible form (::/96) is refused.
 * - Every spelling of an address is one address: URLs are read by the WHATWG parser, which turns
 *   `2130706433`, `0x7f.1`, `0177.0.0.1` and `0` into dotted quads and `[::ffff:127.0.0.1]` into
 *   `[::ffff:7f00:1]` before anything here looks at them.
 * - A name is resolved once per attempt, by `guardedLookup`, which the connection itself uses: the
 *   connection goes to the address that was checked, so a name cannot be re-pointed between the
 *   check and the connect (DNS rebinding). Every address the name has must pass.
 * - Every refused address is refused in the same words (`NOT_PUBLIC`) and with the same code,
 *   whatever the reason: a private address written out, `localhost`, a name resolving to a private
 *   address, a name that does not resolve at all. Otherwise a member could learn which internal
 *   names exist by telling one refusal from another.
 */
import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';

/** What the operator opened (`WEBHOOK_ALLOW_HTTP`, `WEBHOOK_ALLOW_PRIVATE`). */
export interface AddressRules {
  allowHttp: boolean;
  allowPrivate: boolean;
}

/** An address the rules refuse; its message is shown to members (in an attempt's `error`, or a 400). */
export class RefusedAddress extends Error {
  readonly code = 'EREFUSEDADDRESS';
}

/** The one refusal of an address, whatever the reason (see the top of this file). */
export const NOT_PUBLIC = 'does not resolve to a public address';

/** Whether `address` (an IP address in any form Node prints) is a public unicast address. */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const parsed = ipaddr.process(address);
  // ipaddr.js calls the deprecated IPv4-compatible form (::/96, `[::127.0.0.1]`) unicast: refused, as
  // the IPv4 address it carries may be anything.
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).parts.slice(0, 6).every((part) => part === 0)) return false;
  return parsed.range() === 'unicast';
}

/** The URL's host without IPv6 brackets. */
function bareHost(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

/**
 * `raw` read as an endpoint's URL, or RefusedAddress saying why not: a scheme other than `https`
 * (or `http` where allowed), credentials in the URL, or a host that is an address the rules refuse.
 * A host that is a name is checked when it is resolved (`guardedLookup`), except `localhost` and its
 * subdomains, which always mean this machine.
 */
export function checkUrl(raw: string, rules: AddressRules): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new RefusedAddress('is not a URL');
  }
  if (url.protocol !== 'https:' && !(rules.allowHttp && url.protocol === 'http:')) {
    throw new RefusedAddress(rules.allowHttp ? 'must be an http or https URL' : 'must be an https URL');
  }
  if (url.username !== '' || url.password !== '') throw new RefusedAddress('must not carry a user name or password');
  const host = bareHost(url);
  if (rules.allowPrivate) return url;
  if (net.isIP(host) !== 0 ? !isPublicAddress(host) : /(^|\.)localhost\.?$/i.test(host)) {
    throw new RefusedAddress(NOT_PUBLIC);
  }
  return url;
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;

/**
 * A `lookup` for `http.request`: resolves the name once, refuses it unless it has addresses and every
 * one passes the rules, and hands the connection those very addresses. Node calls it only for names;
 * an address literal is checked by `checkUrl` instead. Under the rules a failed resolution is the
 * same refusal as a private address; with private addresses allowed nothing is hidden, and the
 * resolver's own error is kept.
 */
export function guardedLookup(rules: AddressRules) {
  return (hostname: string, options: dns.LookupOptions, callback: LookupCallback): void => {
    dns.lookup(hostname, { all: true, family: options.family ?? 0 }, (error, addresses) => {
      if (error && rules.allowPrivate) return callback(error, []);
      const usable = !error && addresses.length > 0 && (rules.allowPrivate || addresses.every((a) => isPublicAddress(a.address)));
      if (!usable) return callback(new RefusedAddress(NOT_PUBLIC), []);
      if (options.all) return callback(null, addresses);
      callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}
