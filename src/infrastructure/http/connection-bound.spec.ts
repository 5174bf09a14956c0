import { connectionBound, RESERVED_FDS } from './connection-bound';

const limits = (soft: string, hard: string) =>
  [
    'Limit                     Soft Limit           Hard Limit           Units     ',
    'Max processes             127694               127694               processes ',
    `Max open files            ${soft.padEnd(21)}${hard.padEnd(21)}files     `,
    'Max locked memory         8388608              8388608              bytes     ',
  ].join('\n');

describe('connectionBound', () => {
  it('is the open-file limit less what kld keeps for itself', () => {
    expect(connectionBound(limits('1048576', '1048576'))).toBe(1048576 - RESERVED_FDS);
    expect(connectionBound(limits('1024', '4096'))).toBe(1024 - RESERVED_FDS);
  });

  it('is half a small limit, and no bound where the limit is unknown', () => {
    expect(connectionBound(limits('256', '256'))).toBe(128);
    expect(connectionBound(limits('unlimited', 'unlimited'))).toBeNull();
    expect(connectionBound(null)).toBeNull();
    expect(connectionBound('')).toBeNull();
  });
});
