/**
 * The connections one client address may hold at once. The server's total (`maxConnections`) alone
 * let one client fill it with idle sockets, each held until its headers timeout, and every other
 * client was refused meanwhile, `/healthz` included. Counted per address as the rate limits count
 * an unauthenticated caller (IPv6 by its /64); a connection past the cap is closed as soon as it is
 * accepted, before a byte of it is read, as the total's are.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { addressBucket } from './rate-limit.js';

export function capConnectionsPerAddress(server: Server, max: number): void {
  if (max === 0) return;
  const held = new Map<string, number>();
  // Before the HTTP server's own listener, so a refused socket never reaches it with a parser.
  server.prependListener('connection', (socket: Socket) => {
    const bucket = addressBucket(socket.remoteAddress ?? '');
    const count = held.get(bucket) ?? 0;
    if (count >= max) {
      socket.destroy();
      return;
    }
    held.set(bucket, count + 1);
    socket.once('close', () => {
      const left = held.get(bucket)! - 1;
      if (left === 0) held.delete(bucket);
      else held.set(bucket, left);
    });
  });
}
