import * as net from 'node:net';
import { Notifier } from './notifier';

/**
 * What keeps a Node process from exiting: open sockets and connections
 * being opened. A one-shot command (`kld token create`) ends when nothing
 * is left, so a connection its notifier leaves open makes it hang for ever.
 */
function openConnections(): number {
  return process
    .getActiveResourcesInfo()
    .filter((r) => r === 'TCPSocketWrap' || r === 'ConnectWrap').length;
}

function serverUrl(): string {
  const url = process.env.KL_TEST_DATABASE_URL;
  if (!url) throw new Error('KL_TEST_DATABASE_URL is not set: jest global setup did not run');
  return url;
}

describe('Notifier: closing leaves no connection open', () => {
  it('closed while the connection of a hint is still being opened', async () => {
    const before = openConnections();
    const notifier = new Notifier(serverUrl());
    // A command appends, sends its hint without waiting, and is done before
    // the hint's connection is: exactly what `kld token create` does.
    void notifier.notify('kl_notifier_spec', 'x');
    expect(openConnections()).toBeGreaterThan(before);
    await notifier.close();
    expect(openConnections()).toBe(before);
  });

  it('closed while a waiter is setting up its LISTEN', async () => {
    const before = openConnections();
    const notifier = new Notifier(serverUrl());
    const waited = notifier.wait('kl_notifier_spec', 60_000);
    await notifier.close();
    await waited;
    expect(openConnections()).toBe(before);
  });

  it('closed after use, and used again after closing', async () => {
    const before = openConnections();
    const notifier = new Notifier(serverUrl());
    await notifier.wait('kl_notifier_spec', 10); // LISTENs, then times out
    await notifier.notify('kl_notifier_spec', 'x');
    expect(openConnections()).toBe(before + 1);
    await notifier.close();
    await notifier.notify('kl_notifier_spec', 'y');
    await notifier.wait('kl_notifier_spec', 60_000);
    expect(openConnections()).toBe(before);
  });
});

describe('Notifier: a server that never answers', () => {
  it('ends a wait at its timeout, and closes the connections it tried', async () => {
    // Accepts the connection and never answers, as a wedged proxy would.
    const closed: Promise<void>[] = [];
    // It reads (and drops) what comes, so it sees the other side close.
    const silent = net.createServer((socket) => {
      closed.push(new Promise((resolve) => socket.once('close', () => resolve())));
      socket.resume();
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as net.AddressInfo;
    try {
      const notifier = new Notifier(`postgres://kl:pw@127.0.0.1:${port}/kl`, 200);
      await notifier.wait('kl_notifier_spec', 10);
      await notifier.notify('kl_notifier_spec', 'x');
      await notifier.close();
      expect(closed.length).toBeGreaterThan(0); // it did try
      // Each attempt was given up on: kld's side closed every connection.
      await Promise.all(closed);
    } finally {
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});
