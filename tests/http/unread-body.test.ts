/**
 * Answers given without reading the request's body (class: a connection closed while its client is
 * still sending, which the kernel resets under the answer). A raw socket plays a client that asks
 * for `Connection: close` and sends its body in two halves, the second only after a pause in which
 * the service has long decided its answer: the whole answer must arrive, followed by an orderly
 * close, never a reset.
 */
import net from 'node:net';
import { expect } from 'chai';
import { baseUrl, sql } from '../support/harness.js';

interface Ending {
  /** Everything the service sent, headers and body. */
  bytes: Buffer;
  /** How the connection ended: `end` (the service closed it in order) or the socket error's code. */
  ending: string;
}

const PAUSE_MS = 300;

/**
 * Sends `head` and a body of `size` bytes of JSON in two halves `PAUSE_MS` apart (or only the head,
 * with `holdBody`); reads until the connection ends.
 */
async function sendInTwoHalves(head: string, size: number, holdBody = false): Promise<Ending> {
  const url = new URL(baseUrl());
  const body = Buffer.from(`"${'x'.repeat(size - 2)}"`);
  const socket = net.connect(Number(url.port), url.hostname);
  const chunks: Buffer[] = [];
  const ended = new Promise<string>((resolve) => {
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('end', () => resolve('end'));
    socket.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
  try {
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    socket.write(
      `${head}\r\nHost: ${url.host}\r\nConnection: close\r\nContent-Type: application/json\r\n` + `Content-Length: ${body.length}\r\n\r\n`,
    );
    const half = Math.floor(body.length / 2);
    if (!holdBody) socket.write(body.subarray(0, half));
    await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
    if (!socket.destroyed && !holdBody) socket.write(body.subarray(half));
    const ending = await Promise.race([ended, new Promise<string>((resolve) => setTimeout(() => resolve('no end within 10 s'), 10_000))]);
    return { bytes: Buffer.concat(chunks), ending };
  } finally {
    socket.destroy();
  }
}

/** The status, headers and body of the one answer in `bytes`; the body must be exactly Content-Length long. */
function parseAnswer({ bytes, ending }: Ending): { status: number; headers: Map<string, string>; body: string } {
  const split = bytes.indexOf('\r\n\r\n');
  expect(split, `no complete answer head; the connection ended with ${ending}`).to.be.greaterThan(0);
  const [statusLine, ...lines] = bytes.subarray(0, split).toString('latin1').split('\r\n');
  const headers = new Map(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
  const body = bytes.subarray(split + 4);
  expect(body.length, `the body's length (the connection ended with ${ending})`).to.equal(Number(headers.get('content-length')));
  return { status: Number(statusLine!.split(' ')[1]), headers, body: body.toString('utf8') };
}

describe('a body the answer leaves unread, on a connection that closes after the answer', function () {
  this.timeout(20_000);

  it('GET of the contract (196 KB) with a 512 KiB body: the whole contract, then an orderly close', async () => {
    const sent = await sendInTwoHalves('GET /v1/openapi.json HTTP/1.1', 512 * 1024);
    const answer = parseAnswer(sent);
    expect(answer.status).to.equal(200);
    expect(answer.headers.get('connection')).to.equal('close');
    expect(JSON.parse(answer.body).openapi).to.match(/^3\./);
    expect(sent.ending).to.equal('end');
  });

  it('a sign-in-only route without a credential (401 before the body is read) with a 512 KiB body: the 401 envelope, and nothing created', async () => {
    const projects = async () => (await sql<{ count: string }>('select count(*) from projects'))[0]!.count;
    const before = await projects();
    const sent = await sendInTwoHalves('POST /v1/projects HTTP/1.1', 512 * 1024);
    const answer = parseAnswer(sent);
    expect(answer.status).to.equal(401);
    expect(JSON.parse(answer.body).error.code).to.equal('unauthenticated');
    expect(sent.ending).to.equal('end');
    expect(await projects()).to.equal(before);
  });

  it('a body over the 1 MiB limit (413 before it is all read): the 413 envelope, then an orderly close', async () => {
    const sent = await sendInTwoHalves('POST /v1/auth/login HTTP/1.1', 2 * 1024 * 1024);
    const answer = parseAnswer(sent);
    expect(answer.status).to.equal(413);
    expect(JSON.parse(answer.body).error.code).to.equal('payload_too_large');
    expect(sent.ending).to.equal('end');
  });

  it('a client that holds its declared body back still gets its answer, once it has sent nothing for a second', async () => {
    const started = performance.now();
    const sent = await sendInTwoHalves('POST /v1/projects HTTP/1.1', 512 * 1024, true);
    const answer = parseAnswer(sent);
    expect(answer.status).to.equal(401);
    expect(performance.now() - started).to.be.within(900, 5_000);
    expect(sent.ending).to.equal('end');
  });

  it('a body declared past 8 MiB, on a connection kept alive: the 413 at once, with Connection: close, and the connection closed', async () => {
    const url = new URL(baseUrl());
    const socket = net.connect(Number(url.port), url.hostname);
    const chunks: Buffer[] = [];
    const ended = new Promise<string>((resolve) => {
      socket.on('data', (chunk: Buffer) => chunks.push(chunk));
      socket.on('end', () => resolve('end'));
      socket.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    });
    try {
      socket.write(
        `POST /v1/auth/login HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\nContent-Length: ${10 * 1024 * 1024}\r\n\r\n`,
      );
      const ending = await Promise.race([ended, new Promise<string>((resolve) => setTimeout(() => resolve('no end within 5 s'), 5_000))]);
      const answer = parseAnswer({ bytes: Buffer.concat(chunks), ending });
      expect(answer.status).to.equal(413);
      expect(JSON.parse(answer.body).error.code).to.equal('payload_too_large');
      expect(answer.headers.get('connection')).to.equal('close');
      expect(ending).to.equal('end');
    } finally {
      socket.destroy();
    }
  });
});
