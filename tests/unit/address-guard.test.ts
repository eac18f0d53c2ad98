/**
 * The SSRF guard (server/src/webhooks/address-guard.ts) on its own: every spelling of a loopback,
 * private, link-local, carrier-grade NAT, multicast, broadcast, unspecified, unique-local, NAT64 or
 * 6to4 address is refused under the default rules (https only, public addresses only), in the URL
 * and as a bare address; public addresses and names pass; `http` and credentials are refused; each
 * rule the operator opens opens only its own part. `guardedLookup` refuses a name that resolves to
 * loopback, and hands the addresses over when private addresses are allowed.
 * tests/webhooks/ssrf-isolation.test.ts shows the same rules through the service.
 */
import type { LookupAddress } from 'node:dns';
import { expect } from 'chai';
import { checkUrl, guardedLookup, isPublicAddress, RefusedAddress, type AddressRules } from '../../server/src/webhooks/address-guard.js';
import { send } from '../../server/src/webhooks/send.js';

/** The one refusal of an address, whatever the reason, and how an attempt records it. */
const REFUSED = 'does not resolve to a public address';
const REFUSED_ATTEMPT = `refused: the URL ${REFUSED}`;
import { REFUSED_HOSTS } from '../support/refused-hosts.js';

const DEFAULT: AddressRules = { allowHttp: false, allowPrivate: false };
const PRIVATE: AddressRules = { allowHttp: false, allowPrivate: true };
const HTTP: AddressRules = { allowHttp: true, allowPrivate: false };

/** The same addresses as Node or a resolver could hand them over: not normalised by a URL parser. */
const REFUSED_ADDRESSES = [
  '127.0.0.1',
  '127.255.255.254',
  '0.0.0.0',
  '10.0.0.1',
  '172.16.0.1',
  '192.168.1.1',
  '169.254.169.254',
  '100.64.0.1',
  '224.0.0.1',
  '255.255.255.255',
  '::1',
  '::',
  '::ffff:127.0.0.1',
  '::ffff:7f00:1',
  '::ffff:10.0.0.1',
  '::ffff:169.254.169.254',
  '::7f00:1',
  '::a9fe:a9fe',
  'fc00::1',
  'fd12::1',
  'fe80::1',
  'ff02::1',
  '64:ff9b::7f00:1',
  '2002:7f00:1::',
  'not an address',
  '',
];

const PUBLIC_URLS = ['https://93.184.216.34/', 'https://[2606:4700::1111]/', 'https://example.com/'];

function refusal(run: () => unknown): RefusedAddress {
  try {
    run();
  } catch (error) {
    expect(error).to.be.instanceOf(RefusedAddress);
    return error as RefusedAddress;
  }
  throw new Error('expected a RefusedAddress');
}

/** guardedLookup's answer as a promise: the error, or the address(es) and family it hands over. */
function lookup(
  rules: AddressRules,
  hostname: string,
  options: { all?: boolean; family?: number } = {},
): Promise<{ error: NodeJS.ErrnoException | null; address: string | LookupAddress[]; family?: number | undefined }> {
  return new Promise((resolve) => guardedLookup(rules)(hostname, options, (error, address, family) => resolve({ error, address, family })));
}

describe('unit: the webhook address guard', () => {
  it('refuses every spelling of a non-public address under the default rules, with the same words', () => {
    for (const host of REFUSED_HOSTS) {
      for (const url of [`https://${host}/hook`, `https://${host}:8443/hook?x=1`]) {
        expect(refusal(() => checkUrl(url, DEFAULT)).message, url).to.equal(REFUSED);
        // http opened does not open the address.
        expect(refusal(() => checkUrl(url.replace('https:', 'http:'), HTTP)).message, url).to.equal(REFUSED);
      }
    }
  });

  it('judges an address the WHATWG parser wrote, never a spelling it left as is', () => {
    for (const [spelling, written] of [
      ['2130706433', '127.0.0.1'],
      ['0x7f000001', '127.0.0.1'],
      ['0x7f.1', '127.0.0.1'],
      ['0177.0.0.1', '127.0.0.1'],
      ['127.1', '127.0.0.1'],
      ['0', '0.0.0.0'],
      ['[::ffff:127.0.0.1]', '[::ffff:7f00:1]'],
      ['LOCALHOST.', 'localhost.'],
    ] as const) {
      const url = checkUrl(`https://${spelling}/`, PRIVATE);
      expect(url.hostname, spelling).to.equal(written);
    }
  });

  it('answers isPublicAddress false for every non-public address, and for what is not an address', () => {
    for (const address of REFUSED_ADDRESSES) expect(isPublicAddress(address), address).to.equal(false);
    for (const address of ['93.184.216.34', '8.8.8.8', '2606:4700::1111', '2a00:1450:4001:80b::200e', '::ffff:93.184.216.34']) {
      expect(isPublicAddress(address), address).to.equal(true);
    }
  });

  it('accepts public addresses and names over https', () => {
    for (const url of PUBLIC_URLS) expect(checkUrl(url, DEFAULT).href).to.equal(url);
    expect(checkUrl('https://hooks.example.com:8443/a/b?c=d#e', DEFAULT).href).to.equal('https://hooks.example.com:8443/a/b?c=d#e');
  });

  it('refuses http unless allowed, other schemes always, credentials always, and what is not a URL', () => {
    for (const url of ['http://93.184.216.34/', 'http://example.com/']) {
      expect(refusal(() => checkUrl(url, DEFAULT)).message, url).to.equal('must be an https URL');
      expect(refusal(() => checkUrl(url, PRIVATE)).message, url).to.equal('must be an https URL');
      expect(checkUrl(url, HTTP).href, url).to.equal(url);
    }
    for (const url of ['ftp://example.com/', 'file:///etc/passwd', 'gopher://example.com/', 'javascript:alert(1)', 'data:,x']) {
      expect(refusal(() => checkUrl(url, DEFAULT)).message, url).to.equal('must be an https URL');
      expect(refusal(() => checkUrl(url, HTTP)).message, url).to.equal('must be an http or https URL');
    }
    for (const url of [
      'https://user:pw@example.com/',
      'https://user@example.com/',
      'https://:pw@example.com/',
      'https://u:p@93.184.216.34/',
    ]) {
      for (const rules of [DEFAULT, HTTP, PRIVATE, { allowHttp: true, allowPrivate: true }]) {
        expect(refusal(() => checkUrl(url, rules)).message, url).to.equal('must not carry a user name or password');
      }
    }
    for (const raw of ['not a url', '', 'https://', '//example.com/', 'https://exa mple.com/']) {
      expect(refusal(() => checkUrl(raw, DEFAULT)).message, raw).to.equal('is not a URL');
    }
  });

  it('lets WEBHOOK_ALLOW_PRIVATE open the non-public addresses, and only them', () => {
    for (const host of REFUSED_HOSTS) {
      const url = `https://${host}/hook`;
      expect(checkUrl(url, PRIVATE).protocol, url).to.equal('https:');
      expect(refusal(() => checkUrl(url.replace('https:', 'http:'), PRIVATE)).message, url).to.equal('must be an https URL');
    }
    expect(checkUrl('http://127.0.0.1:8080/hook', { allowHttp: true, allowPrivate: true }).href).to.equal('http://127.0.0.1:8080/hook');
  });

  it('guardedLookup refuses a name that resolves to loopback unless private addresses are allowed', async () => {
    for (const options of [{}, { all: true }, { family: 4 }]) {
      const refused = await lookup(DEFAULT, 'localhost', options);
      expect(refused.error, JSON.stringify(options)).to.be.instanceOf(RefusedAddress);
      expect(refused.error!.code).to.equal('EREFUSEDADDRESS');
      expect(refused.error!.message).to.equal(REFUSED);
      expect(refused.address).to.deep.equal([]);
      // http opened does not open the address either.
      expect((await lookup(HTTP, 'localhost', options)).error?.code).to.equal('EREFUSEDADDRESS');
    }

    const one = await lookup(PRIVATE, 'localhost');
    expect(one.error).to.equal(null);
    expect(one.address).to.be.oneOf(['127.0.0.1', '::1']);
    expect(one.family).to.equal(one.address === '::1' ? 6 : 4);

    const all = await lookup(PRIVATE, 'localhost', { all: true });
    expect(all.error).to.equal(null);
    expect(all.address).to.be.an('array').that.is.not.empty;
    for (const entry of all.address as LookupAddress[]) {
      expect(entry.address).to.be.oneOf(['127.0.0.1', '::1']);
      expect(entry.family).to.equal(entry.address === '::1' ? 6 : 4);
    }

    const v4 = await lookup(PRIVATE, 'localhost', { family: 4 });
    expect(v4).to.deep.include({ error: null, address: '127.0.0.1', family: 4 });
  });
  it('refuses a name that does not resolve exactly as one that resolves to loopback: same error, message and code, and the same attempt error', async () => {
    const nowhere = 'signalboard-nowhere.invalid';
    for (const options of [{}, { all: true }]) {
      const [unresolved, loopback] = await Promise.all([lookup(DEFAULT, nowhere, options), lookup(DEFAULT, 'localhost', options)]);
      for (const refused of [unresolved, loopback]) {
        expect(refused.error).to.be.instanceOf(RefusedAddress);
        expect(refused.error).to.include({ message: REFUSED, code: 'EREFUSEDADDRESS' });
        expect(refused.address).to.deep.equal([]);
      }
    }
    // Where nothing is hidden (private addresses allowed), the resolver's own error is kept.
    expect((await lookup(PRIVATE, nowhere)).error?.code).to.equal('ENOTFOUND');

    const sending = { rules: HTTP, timeoutMs: 5_000 };
    const attempts = await Promise.all(
      [`http://${nowhere}/hook`, 'http://localhost/hook', 'http://127.0.0.1:9/hook', 'http://10.0.0.1/hook', 'http://[::1]/hook'].map(
        (url) => send(url, '{}', {}, sending),
      ),
    );
    for (const attempt of attempts) expect(attempt).to.deep.include({ statusCode: null, body: null, error: REFUSED_ATTEMPT });
  });
});
