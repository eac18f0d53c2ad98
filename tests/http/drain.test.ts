/**
 * The connection drain on its own (class: a shutdown that closes a connection a client may be
 * sending on). A raw socket plays the keep-alive client, so each byte the server sends or withholds
 * is seen as it is.
 */
import http from 'node:http';
import net from 'node:net';
import { expect } from 'chai';
import { ConnectionDrain } from '../../server/src/http/drain.js';

interface Served {
  server: http.Server;
  drain: ConnectionDrain;
  port: number;
  /** Resolvers of the slow answers the handler is holding open, in arrival order. */
  held: (() => void)[];
}

/** `/slow` writes its headers and first byte at once and its last when released; anything else answers `ok`. */
async function serve(keepAliveTimeout: number): Promise<Served> {
  const server = http.createServer({ keepAliveTimeout });
  const drain = new ConnectionDrain(server);
  const held: (() => void)[] = [];
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    drain.track(res);
    if (req.url === '/slow') {
      res.writeHead(200, { 'content-length': '2' });
      res.write('o');
      held.push(() => res.end('k'));
    } else {
      res.setHeader('content-length', '2');
      res.end('ok');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, drain, port: (server.address() as net.AddressInfo).port, held };
}

/** A keep-alive client on one socket, collecting what the server sends and whether it closed. */
class RawClient {
  received = '';
  ended = false;
  private readonly socket: net.Socket;

  constructor(port: number) {
    this.socket = net.connect(port, '127.0.0.1');
    this.socket.setEncoding('latin1');
    this.socket.on('data', (chunk: string) => (this.received += chunk));
    this.socket.on('end', () => (this.ended = true));
    this.socket.on('error', () => (this.ended = true));
  }

  send(path: string): void {
    this.socket.write(`GET ${path} HTTP/1.1\r\nHost: drain.test\r\n\r\n`);
  }

  /** Waits until `count` complete answers (each a body of `ok`) have arrived, or the socket ended. */
  async answers(count: number, timeoutMs = 2_000): Promise<string[]> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const answers = this.received.split(/(?=HTTP\/1\.1 )/).filter((answer) => answer.endsWith('\r\n\r\nok'));
      if (answers.length >= count || this.ended || performance.now() > deadline) return answers;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  close(): void {
    this.socket.destroy();
  }
}

describe('the connection drain', () => {
  const opened: Served[] = [];
  afterEach(() => {
    for (const { server } of opened.splice(0)) server.closeAllConnections();
  });

  it('never closes a connection whose last answer started before draining: the next request on it is answered, with Connection: close', async () => {
    const served = await serve(5_000);
    opened.push(served);
    const client = new RawClient(served.port);
    client.send('/slow');
    while (served.held.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    // The answer's headers went out without `Connection: close`; draining starts before its last byte.
    const report = served.drain.drain(2_000, () => undefined);
    served.held[0]?.();
    expect(await client.answers(1)).to.have.length(1);
    // The client believes the connection is still open, and sends on it a little later.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(client.ended, 'the server closed a connection its client may send on').to.equal(false);
    client.send('/next');
    const answers = await client.answers(2);
    expect(answers).to.have.length(2);
    expect(answers[1] ?? '').to.match(/^HTTP\/1\.1 200 OK\r\n/);
    expect((answers[1] ?? '').toLowerCase()).to.include('connection: close');
    const { drained, answered, cut } = await report;
    expect({ drained, answered, cut }).to.deep.equal({ drained: true, answered: 2, cut: 0 });
    client.close();
  });

  it('leaves an idle connection to its keep-alive timeout, then reports drained with nothing cut', async () => {
    const served = await serve(300);
    opened.push(served);
    const client = new RawClient(served.port);
    client.send('/first');
    expect(await client.answers(1)).to.have.length(1);
    const report = await served.drain.drain(3_000, () => undefined);
    expect(report.drained).to.equal(true);
    expect(report.cut).to.equal(0);
    expect(report.answered).to.equal(0);
    expect(report.ms).to.be.at.least(200);
    expect(client.ended).to.equal(true);
  });

  it('refuses new connections once draining starts', async () => {
    const served = await serve(5_000);
    opened.push(served);
    const report = served.drain.drain(1_000, () => undefined);
    const refused = await new Promise<string>((resolve) => {
      const socket = net.connect(served.port, '127.0.0.1');
      socket.on('connect', () => resolve('connected'));
      socket.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    });
    expect(refused).to.equal('ECONNREFUSED');
    expect((await report).drained).to.equal(true);
  });

  it('cuts at the deadline an answer its owner never finishes, and says so', async () => {
    const served = await serve(5_000);
    opened.push(served);
    const client = new RawClient(served.port);
    client.send('/slow');
    while (served.held.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const report = await served.drain.drain(300, () => undefined);
    expect({ drained: report.drained, cut: report.cut }).to.deep.equal({ drained: false, cut: 1 });
    await client.answers(1, 500);
    expect(client.ended).to.equal(true);
  });
});
