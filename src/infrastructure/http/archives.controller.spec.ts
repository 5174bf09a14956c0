import * as http from 'node:http';
import * as net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Response } from 'express';
import type { StateArchives } from '../../application/archive/state-archive';
import type { Config } from '../config/config';
import { ArchivesController } from './archives.controller';

/**
 * An export to a client that stops reading and goes away: the export must
 * end there, letting go of the history it was reading, not wait forever for
 * a socket that will never drain again.
 */
describe('ArchivesController.export', () => {
  it('ends, and closes the history it reads, when the client goes away mid-export', async () => {
    let linesSent = 0;
    let historyClosed = false;
    const archives = {
      async *export() {
        try {
          // More than any socket buffers: the writes must wait for the reader.
          for (;;) {
            linesSent++;
            yield `${'x'.repeat(64 * 1024)}\n`;
          }
        } finally {
          historyClosed = true;
        }
      },
    } as unknown as StateArchives;
    const controller = new ArchivesController(archives, {} as Config);
    let exported!: Promise<void>;
    const server = http.createServer((_req, res) => {
      exported = controller.export(['s'], res as unknown as Response);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const { port } = server.address() as AddressInfo;
      const client = net.connect(port, '127.0.0.1');
      client.pause(); // reads nothing
      client.write('GET /v1/archives/s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
      // Wait until the export is stuck on a full socket.
      while (linesSent < 50) await new Promise((r) => setTimeout(r, 10));
      client.destroy();
      await exported;
      expect(historyClosed).toBe(true);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
