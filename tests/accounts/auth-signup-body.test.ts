/**
 * Sign-up's body on the wire: content types, malformed and oversized bodies (sent whole, chunked, or
 * with a Content-Length over the bound, on a raw connection), and the connection after a 413.
 */
import { expect } from 'chai';
import net from 'node:net';
import { baseUrl, secret } from '../support/harness.js';
import { expectError, http } from '../support/http.js';
import { expectNothingStoredBy, signup, signupBody, snapshot, usersNamed } from './auth-support.js';

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Complete responses at the start of `data` (every answer of this service has a Content-Length). */
function parseResponses(data: string): RawResponse[] {
  const responses: RawResponse[] = [];
  let rest = data;
  for (;;) {
    const headEnd = rest.indexOf('\r\n\r\n');
    if (headEnd < 0) return responses;
    const [statusLine, ...lines] = rest.slice(0, headEnd).split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = Number(headers['content-length'] ?? 0);
    const bodyBytes = Buffer.from(rest.slice(headEnd + 4), 'utf8');
    if (bodyBytes.length < length) return responses;
    responses.push({ status: Number(statusLine!.split(' ')[1]), headers, body: bodyBytes.subarray(0, length).toString('utf8') });
    rest = bodyBytes.subarray(length).toString('utf8');
  }
}

/**
 * POST /v1/auth/signup with `json` sent chunked (no Content-Length) or with its Content-Length, in
 * pieces of 64 KiB written one event-loop turn apart (so the server can answer while the body is
 * still coming), on a raw connection of its own, so that whatever state the server leaves the
 * connection in cannot reach fetch's shared pool. With `followUp`, then sends `GET /v1` on the same
 * connection, as a keep-alive client would, and waits up to 3 s for its answer.
 */
async function oversizedThenFollowUp(
  json: string,
  followUp: boolean,
  framing: 'chunked' | 'length' = 'chunked',
): Promise<{ responses: RawResponse[]; ending: string }> {
  const url = new URL(baseUrl());
  const socket = net.connect(Number(url.port), url.hostname);
  let data = '';
  let ending = 'the connection stayed open without an answer';
  const settled = new Promise<void>((resolve) => {
    socket.on('data', (chunk) => {
      data += chunk.toString('utf8');
      if (parseResponses(data).length >= (followUp ? 2 : 1)) resolve();
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      ending = `connection error ${error.code ?? error.message}`;
      resolve();
    });
    socket.on('close', () => {
      if (ending.startsWith('the connection stayed')) ending = 'the connection was closed';
      resolve();
    });
  });
  try {
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const bytes = Buffer.from(json, 'utf8');
    const chunked = framing === 'chunked';
    socket.write(
      `POST /v1/auth/signup HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: ` +
        `application/json\r\n${chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${bytes.length}`}\r\n\r\n`,
    );
    for (let at = 0; at < bytes.length && !socket.destroyed; at += 64 * 1024) {
      const piece = bytes.subarray(at, at + 64 * 1024);
      if (chunked) socket.write(`${piece.length.toString(16)}\r\n`);
      socket.write(piece);
      if (chunked) socket.write('\r\n');
      await new Promise((r) => setImmediate(r));
    }
    if (chunked && !socket.destroyed) socket.write('0\r\n\r\n');
    if (followUp) {
      // Wait for the first answer, as a client reusing the connection does.
      for (let waited = 0; parseResponses(data).length === 0 && waited < 3000 && !socket.destroyed; waited += 20)
        await new Promise((r) => setTimeout(r, 20));
      if (!socket.destroyed) socket.write(`GET /v1 HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`);
    }
    await Promise.race([settled, new Promise((r) => setTimeout(r, 3000))]);
    return { responses: parseResponses(data), ending };
  } finally {
    socket.destroy();
  }
}

describe('POST /v1/auth/signup', () => {
  describe('the body on the wire', () => {
    it('refuses Content-Type: text/plain with 415 unsupported_media_type', async () => {
      const body = await signupBody();
      await expectNothingStoredBy(
        () => http('POST', '/v1/auth/signup', { headers: { 'Content-Type': 'text/plain' }, body: JSON.stringify(body) }),
        415,
        'unsupported_media_type',
      );
      expect(await usersNamed(body.username, body.email)).to.equal(0);
    });

    it('refuses malformed JSON with 400 invalid_request', async () => {
      const body = await signupBody();
      const answer = await expectNothingStoredBy(
        () => http('POST', '/v1/auth/signup', { headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body).slice(0, -1) }),
        400,
        'invalid_request',
      );
      expect(answer.json.error.details.map((d: { path: string }) => d.path)).to.deep.equal(['/body']);
      expect(await usersNamed(body.username, body.email)).to.equal(0);
    });

    it('refuses a request with no body with 400 invalid_request', async () => {
      const answer = await expectNothingStoredBy(
        () => http('POST', '/v1/auth/signup', { headers: { 'Content-Type': 'application/json' } }),
        400,
        'invalid_request',
      );
      expect(answer.json.error.details.map((d: { path: string }) => d.path)).to.deep.equal(['/body']);
      const bare = await expectNothingStoredBy(() => http('POST', '/v1/auth/signup'), 400, 'invalid_request');
      expect(bare.json.error.details.map((d: { path: string }) => d.path)).to.deep.equal(['/body']);
    });

    it('refuses a JSON array with 400 invalid_request', async () => {
      const body = await signupBody();
      await expectNothingStoredBy(() => signup([body]), 400, 'invalid_request');
      expect(await usersNamed(body.username, body.email)).to.equal(0);
    });

    it('refuses a body of 2 MiB with 413 payload_too_large', async () => {
      const body = await signupBody({ padding: 'x'.repeat(2 * 1024 * 1024) });
      await expectNothingStoredBy(() => signup(body), 413, 'payload_too_large');
      expect(await usersNamed(body.username, body.email)).to.equal(0);
    });

    it('refuses a chunked body (no Content-Length) that grows past 1 MiB with 413 payload_too_large', async () => {
      const body = await signupBody({ padding: 'x'.repeat(2 * 1024 * 1024) });
      const before = await snapshot();
      const { responses } = await oversizedThenFollowUp(JSON.stringify(body), false);
      const first = responses[0]!;
      expectError(
        { status: first.status, headers: new Headers(first.headers), text: first.body, json: JSON.parse(first.body) },
        413,
        'payload_too_large',
      );
      expect(await snapshot()).to.deep.equal(before);
      expect(await usersNamed(body.username, body.email)).to.equal(0);
    });

    it('after refusing a chunked body with 413, answers the next request on the same connection or closes it', async function () {
      this.timeout(10_000);
      const body = await signupBody({ padding: 'x'.repeat(2 * 1024 * 1024) });
      const { responses, ending } = await oversizedThenFollowUp(JSON.stringify(body), true);
      const [first, second] = responses;
      expect(first!.status).to.equal(413);
      if ((first!.headers.connection ?? '').toLowerCase() === 'close') return; // the client is told not to reuse the connection
      expect(
        second?.status,
        `the 413 said "Connection: ${first!.headers.connection}", but a GET /v1 sent next on that connection got ${
          second ? `status ${second.status}` : `no answer (${ending})`
        }`,
      ).to.equal(200);
    });

    it(
      'refuses a body whose Content-Length is over 1 MiB with 413 while it is still being sent, without resetting the connection, and ' +
        'answers the next request on it',
      async function () {
        this.timeout(10_000);
        const body = await signupBody({ padding: 'x'.repeat(2 * 1024 * 1024) });
        const before = await snapshot();
        const { responses, ending } = await oversizedThenFollowUp(JSON.stringify(body), true, 'length');
        expect(
          responses.map((r) => r.status),
          ending,
        ).to.deep.equal([413, 200]);
        expect(responses[0]!.headers.connection ?? 'keep-alive').to.not.equal('close');
        expect(JSON.parse(responses[0]!.body).error.code).to.equal('payload_too_large');
        expect(await snapshot()).to.deep.equal(before);
      },
    );

    it('accepts application/json with a charset parameter', async () => {
      const answer = await http('POST', '/v1/auth/signup', {
        headers: { 'Content-Type': 'application/json; charset=utf-8' },
        body: JSON.stringify(await signupBody()),
      });
      expect(answer.status, answer.text).to.equal(201);
      secret(answer.json.data.token);
    });
  });
});
