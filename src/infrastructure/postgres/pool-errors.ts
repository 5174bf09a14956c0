import type { Pool } from 'pg';

/**
 * A pool whose lost connections end no process. node-postgres reports a
 * connection that ends while no statement runs as an `error` event on its
 * client, and an `error` event nobody listens to is thrown: the pool
 * listens on idle clients (and reports through the pool's own event), but
 * a client checked out between two statements of a transaction (a
 * projector's, a refresh's) has no listener, and a database restart at that
 * moment would take kld down. Heard here, the loss surfaces where it
 * matters: the client's next statement fails, and the pool drops the client
 * when it is released.
 */
export function survivingConnectionLoss<P extends Pool>(pool: P): P {
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}
