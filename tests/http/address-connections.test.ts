/**
 * Connections per client address (`HTTP_MAX_CONNECTIONS_PER_ADDRESS`): one address holding idle
 * sockets cannot take the connections every other client needs; a connection past its cap is
 * closed at once, and the cap is off behind a proxy (`TRUST_PROXY`), where every connection is the
 * proxy's. Other addresses are 127.0.0.2 and 127.0.0.3, which Linux routes on loopback.
 */
import { expect } from 'chai';
import http from 'node:http';
import net from 'node:net';
import { startExtraServer, type TestServer } from '../support/harness.js';

/** A TCP connection from `from` that sends nothing; resolves once connected. */
function idleSocket(server: TestServer, from = '127.0.0.1'): Promise<net.Socket> {
  const { port } = new URL(server.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port: Number(port), localAddress: from }, () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Whether the server closes `socket` within `ms`. */
function closedWithin(socket: net.Socket, ms: number): Promise<boolean> {
  if (socket.destroyed) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** `GET /healthz` from `from` on a connection of its own: its status, or the connection's error code. */
function healthz(server: TestServer, from: string): Promise<number | string> {
  const { port } = new URL(server.url);
  return new Promise((resolve) => {
    const request = http.get({ host: '127.0.0.1', port: Number(port), path: '/healthz', localAddress: from, agent: false }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    request.setTimeout(5_000, () => request.destroy(new Error('no answer within 5 s')));
  });
}

describe('connections per client address', function () {
  this.timeout(60_000);
  const sockets: net.Socket[] = [];
  let server: TestServer | undefined;
  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.destroy();
    await server?.close();
    server = undefined;
  });

  it('1,000 idle sockets from one address leave /healthz answering others at once (the defaults)', async () => {
    server = await startExtraServer();
    // In batches: a thousand at once would overflow the listen backlog (the server shares this
    // process's event loop), and the kernel would retry the dropped ones for seconds.
    for (let batch = 0; batch < 20; batch++) {
      const opened = await Promise.allSettled(Array.from({ length: 50 }, () => idleSocket(server!)));
      for (const result of opened) if (result.status === 'fulfilled') sockets.push(result.value);
    }
    // Past the first 256, the server closes each as soon as it accepts it; the first 256 stay open.
    const closed = await Promise.all(sockets.map((socket) => closedWithin(socket, 3_000)));
    expect(closed.filter((gone) => !gone)).to.have.length(256);
    const started = performance.now();
    expect(await healthz(server, '127.0.0.2')).to.equal(200);
    expect(performance.now() - started).to.be.below(1_000);
    // The address at its cap gets nothing more until it lets one go.
    expect(await healthz(server, '127.0.0.1')).to.equal('ECONNRESET');
  });

  it('closes the connection past the cap at once, and takes one again once another closes', async () => {
    server = await startExtraServer({ HTTP_MAX_CONNECTIONS_PER_ADDRESS: '3' });
    for (let i = 0; i < 3; i++) sockets.push(await idleSocket(server));
    const fourth = await idleSocket(server);
    sockets.push(fourth);
    expect(await closedWithin(fourth, 2_000)).to.equal(true);
    for (const held of sockets.slice(0, 3)) expect(await closedWithin(held, 50)).to.equal(false);
    expect(await healthz(server, '127.0.0.3')).to.equal(200);

    sockets[0]!.destroy();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await healthz(server, '127.0.0.1')).to.equal(200);
  });

  it('does not count behind a proxy (TRUST_PROXY), where every connection is the proxy’s', async () => {
    server = await startExtraServer({ HTTP_MAX_CONNECTIONS_PER_ADDRESS: '3', TRUST_PROXY: '1' });
    for (let i = 0; i < 5; i++) sockets.push(await idleSocket(server));
    for (const socket of sockets) expect(await closedWithin(socket, 50)).to.equal(false);
    expect(await healthz(server, '127.0.0.1')).to.equal(200);
  });
});
