import { DomainError } from '../shared/domain-error';
import { parseLockInfo, storedLockInfo } from './lock-info';

const info = (extra: Record<string, unknown> = {}) => ({
  ID: 'f4c2b1d0-1111-2222-3333-444455556666',
  Operation: 'OperationTypeApply',
  Info: '',
  Who: 'alice@laptop',
  Version: '1.11.4',
  Created: '2026-11-30T10:00:00.123456789Z',
  Path: '',
  ...extra,
});

function messageOf(value: unknown): string {
  try {
    parseLockInfo(value);
  } catch (e) {
    expect(e).toBeInstanceOf(DomainError);
    expect((e as DomainError).code).toBe('STATE.INVALID');
    return (e as DomainError).message;
  }
  throw new Error('expected a refusal');
}

describe('parseLockInfo', () => {
  it('keeps every member as sent, NUL characters in free-form members included', () => {
    const sent = info({ Info: 'made by \u0000 a script', Future: { x: [1, 'a\u0000'] } });
    expect(parseLockInfo(sent)).toEqual(sent);
  });

  it.each([
    [info({ Who: 'evil\u0000who' }), 'lock info Who holds a NUL character'],
    [info({ ID: 'L\u0000' }), 'lock info ID holds a NUL character'],
    [info({ Operation: 'Op\u0000' }), 'lock info Operation holds a NUL character'],
    [info({ Who: 'a\ud800' }), 'lock info Who holds an unpaired UTF-16 surrogate'],
    [info({ Who: 42 }), 'lock info Who must be a string'],
    [info({ ID: '' }), 'lock info ID must be a non-empty string'],
    [info({ N: Infinity }), 'lock info N is not plain JSON'],
    [[info()], 'lock info must be a JSON object'],
  ])('refuses %j: %s', (value, message) => {
    expect(messageOf(value)).toContain(message);
  });

  it('reads back a stored lock whatever it holds (events written by older versions)', () => {
    const old = info({ Who: 'evil\u0000who' });
    expect(storedLockInfo(old)).toEqual(old);
  });
});
