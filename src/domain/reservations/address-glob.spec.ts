import { DomainError } from '../shared/domain-error';
import { parseInstanceAddress } from '../terraform/instance-address';
import {
  globCovers,
  globsIntersect,
  normalizeAddressGlob,
  parseAddressGlob,
  reservationsConflict,
} from './address-glob';

const meet = (a: string, b: string) => globsIntersect(parseAddressGlob(a), parseAddressGlob(b));
const covers = (glob: string, address: string) =>
  globCovers(parseAddressGlob(glob), parseInstanceAddress(address));

describe('address globs', () => {
  describe('parsing', () => {
    it.each([
      ['*', '*'],
      ['module.web', 'module.web.*'],
      ['module.web.*', 'module.web.*'],
      ['module.web[0]', 'module.web[0].*'],
      ['module.a["x"].module.b.*', 'module.a["x"].module.b.*'],
      ['aws_vpc.main', 'aws_vpc.main'],
      ['aws_vpc.main[0]', 'aws_vpc.main[0]'],
      ['module.a["x"].aws_s3_bucket.b[0]', 'module.a["x"].aws_s3_bucket.b[0]'],
      ['data.aws_ami.x', 'data.aws_ami.x'],
      ['module.net.data.aws_ami.x["k"]', 'module.net.data.aws_ami.x["k"]'],
      // A quoted key may hold what the grammar uses.
      ['module.a["x.*"].*', 'module.a["x.*"].*'],
      ['module.a["x.*"].aws_s3_bucket.b', 'module.a["x.*"].aws_s3_bucket.b'],
      ['aws_s3_bucket.b["a[1].b"]', 'aws_s3_bucket.b["a[1].b"]'],
    ])('reads %s as %s', (text, spelled) => {
      expect(normalizeAddressGlob(text)).toBe(spelled);
    });

    it.each([
      [''],
      ['**'],
      ['aws_vpc'],
      ['aws_vpc.main.*'], // .* only after a module path
      ['module.a["x.*"].b'], // a module followed by a bare word is no resource
      ['module.a[*]'],
      ['module.a[01]'],
      ['aws_vpc.main (deposed object 00000001)'],
      ['aws_vpc.main["unterminated]'],
      ['module.a\u0000.*'],
      [`module.${'a'.repeat(900)}.*`],
    ])('refuses %j with RESERVATION.GLOB_INVALID', (text) => {
      let error: unknown;
      try {
        parseAddressGlob(text);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(DomainError);
      expect((error as DomainError).code).toBe('RESERVATION.GLOB_INVALID');
    });
  });

  describe('intersection is exact', () => {
    it.each([
      // equal literals, and everything meets *
      ['aws_vpc.main', 'aws_vpc.main', true],
      ['*', 'aws_vpc.main[3]', true],
      ['*', 'module.a.*', true],
      ['*', '*', true],
      // a resource without key is all its instances
      ['aws_vpc.main', 'aws_vpc.main[0]', true],
      ['aws_vpc.main', 'aws_vpc.main["k"]', true],
      ['aws_vpc.main', 'aws_vpc.other', false],
      ['aws_vpc.main', 'aws_subnet.main', false],
      // keys by type and value, never as text prefixes
      ['x.y[1]', 'x.y[10]', false],
      ['x.y[1]', 'x.y["1"]', false],
      ['x.y["a"]', 'x.y["a"]', true],
      ['x.y["a"]', 'x.y["ab"]', false],
      // module names are whole steps
      ['module.a.*', 'module.ab.x.y', false],
      ['module.a.*', 'module.a.x.y', true],
      ['module.a.*', 'module.ab.*', false],
      ['module.ab.*', 'module.a.*', false],
      // a module call without key is every instance of it
      ['module.a', 'module.a[0].x.y', true],
      ['module.a', 'module.a["k"].module.b.x.y', true],
      ['module.a[0]', 'module.a[1].x.y', false],
      ['module.a[0]', 'module.a[0].x.y', true],
      ['module.a[0].*', 'module.a.*', true],
      ['module.a[1]', 'module.a[10].*', false],
      // nesting: open globs meet when one is a prefix of the other
      ['module.a.*', 'module.a.module.b.*', true],
      ['module.a.module.b.*', 'module.a.module.c.*', false],
      ['module.a.module.b.*', 'module.b.*', false],
      // a resource sits at exactly its depth
      ['module.a.*', 'x.y', false],
      ['module.a.x.y', 'x.y', false],
      ['module.a.module.b.x.y', 'module.a.*', true],
      ['module.a.x.y', 'module.a.module.b.*', false],
      // quoted keys with the grammar's characters inside
      ['module.a["x.*"].*', 'module.a["x"].x.y', false],
      ['module.a["x.*"].*', 'module.a["x.*"].x.y', true],
      ['module.a["x.*"].*', 'module.a.*', true],
      ['module.a["x"].*', 'module.a["xy"].*', false],
      ['x.y["a.b"]', 'x.y["a"]', false],
      ['x.y["a]"]', 'x.y["a]"]', true],
      // data sources are their own resources
      ['data.aws_ami.x', 'aws_ami.x', false],
      ['data.aws_ami.x', 'data.aws_ami.x[0]', true],
      ['module.m.*', 'module.m.data.aws_ami.x', true],
    ])('%s ∩ %s: %s', (a, b, expected) => {
      expect(meet(a, b)).toBe(expected);
      expect(meet(b, a)).toBe(expected);
    });

    it('agrees with coverage: two globs meet exactly when some address is covered by both', () => {
      const globs = [
        '*',
        'module.a.*',
        'module.a[0].*',
        'module.a["0"].*',
        'module.a.module.b.*',
        'module.ab.*',
        'x.y',
        'x.y[0]',
        'x.y["0"]',
        'data.x.y',
        'module.a.x.y',
        'module.a[0].x.y[1]',
        'module.a.module.b.x.y',
      ];
      const addresses = [
        'x.y',
        'x.y[0]',
        'x.y["0"]',
        'data.x.y',
        'data.x.y[0]',
        'module.a.x.y',
        'module.a[0].x.y',
        'module.a[0].x.y[1]',
        'module.a["0"].x.y',
        'module.a.module.b.x.y',
        'module.a[0].module.b.x.y',
        'module.a["0"].module.b.x.y',
        'module.ab.x.y',
        'module.a.module.b.z.w',
      ];
      for (const a of globs) {
        for (const b of globs) {
          const witness = addresses.some((addr) => covers(a, addr) && covers(b, addr));
          // The address list holds a witness for every pair that meets.
          expect([a, b, meet(a, b)]).toEqual([a, b, witness]);
        }
      }
    });
  });

  describe('coverage', () => {
    it.each([
      ['*', 'module.a[0].x.y["k"]', true],
      ['module.web.*', 'module.web.aws_instance.a[0]', true],
      ['module.web.*', 'module.web2.aws_instance.a', false],
      ['module.web', 'module.web[1].aws_instance.a', true],
      ['module.web[0]', 'module.web.aws_instance.a', false],
      ['aws_instance.a', 'aws_instance.a[3]', true],
      ['aws_instance.a[3]', 'aws_instance.a[30]', false],
      ['aws_instance.a[3]', 'aws_instance.a', false],
      ['aws_instance.a', 'aws_instance.a (deposed object 00000001)', true],
      ['aws_instance.a[0]', 'aws_instance.a[0] (deposed object 00000001)', true],
      ['aws_instance.a', 'module.m.aws_instance.a', false],
      ['data.aws_ami.x', 'data.aws_ami.x', true],
      ['data.aws_ami.x', 'aws_ami.x', false],
    ])('%s covers %s: %s', (glob, address, expected) => {
      expect(covers(glob, address)).toBe(expected);
    });
  });

  describe('the conflict matrix', () => {
    const r = (glob: string, mode: 'read' | 'write') => ({ glob: parseAddressGlob(glob), mode });
    it.each([
      ['read', 'read', false],
      ['read', 'write', true],
      ['write', 'read', true],
      ['write', 'write', true],
    ] as const)('overlapping %s and %s conflict: %s', (a, b, expected) => {
      expect(reservationsConflict(r('module.web.*', a), r('module.web.x.y', b))).toBe(expected);
    });

    it('disjoint globs never conflict', () => {
      expect(reservationsConflict(r('module.web.*', 'write'), r('module.db.*', 'write'))).toBe(
        false,
      );
    });
  });
});
