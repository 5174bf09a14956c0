import { isDatabaseUnavailable } from './database-unavailable';

const withCode = (code: string, message = 'x') => Object.assign(new Error(message), { code });

describe('isDatabaseUnavailable', () => {
  it.each([
    ['refused', withCode('ECONNREFUSED')],
    ['reset', withCode('ECONNRESET')],
    ['admin shutdown', withCode('57P01')],
    ['starting up', withCode('57P03')],
    ['too many connections', withCode('53300')],
    ['connection exception class', withCode('08006')],
    ['node-postgres: ended', new Error('Connection terminated unexpectedly')],
    ['pool: connect timeout', new Error('Connection terminated due to connection timeout')],
    ['pool: every client busy', new Error('timeout exceeded when trying to connect')],
    ['wrapped', new Error('reading the state', { cause: withCode('ECONNREFUSED') })],
    ['another realm', { code: 'ECONNREFUSED', message: 'connect ECONNREFUSED' }],
  ])('%s: unavailable', (_, err) => expect(isDatabaseUnavailable(err)).toBe(true));

  it.each([
    ['syntax error', withCode('42601')],
    ['unique violation', withCode('23505')],
    ['serialization failure', withCode('40001')],
    ['a bug', new TypeError('x is undefined')],
    ['not an error', 'ECONNREFUSED'],
    ['nothing', undefined],
  ])('%s: not', (_, err) => expect(isDatabaseUnavailable(err)).toBe(false));
});
