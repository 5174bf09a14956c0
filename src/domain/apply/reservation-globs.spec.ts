import { collapseToGlobs } from './reservation-globs';

describe('collapseToGlobs', () => {
  it('names a module once when every known address in it is reserved', () => {
    const universe = ['module.web.a.x', 'module.web.b.y[0]', 'module.web.b.y[1]', 'c.z'];
    expect(
      collapseToGlobs(['module.web.a.x', 'module.web.b.y[0]', 'module.web.b.y[1]'], universe),
    ).toEqual(['module.web.*']);
  });

  it('keeps literal addresses when the module holds anything else', () => {
    const universe = ['module.web.a.x', 'module.web.a.y', 'module.web.b.z'];
    expect(collapseToGlobs(['module.web.a.x', 'module.web.a.y'], universe)).toEqual([
      'module.web.a.x',
      'module.web.a.y',
    ]);
  });

  it('does not swallow a module whose name only starts the same (module.a vs module.ab)', () => {
    const universe = ['module.a.t.x', 'module.a.t.y', 'module.ab.t.x'];
    expect(collapseToGlobs(['module.a.t.x', 'module.a.t.y'], universe)).toEqual(['module.a.*']);
    expect(collapseToGlobs(['module.a.t.x', 'module.a.t.y', 'module.ab.t.x'], universe)).toEqual([
      'module.a.*',
      'module.ab.t.x',
    ]);
  });

  it('collapses per module instance, with quoted and numeric keys', () => {
    const universe = [
      'module.a["x"].t.n',
      'module.a["x"].t.m',
      'module.a["x.y"].t.n',
      'module.a["x.y"].t.m',
      'module.b[1].t.n',
      'module.b[1].t.m',
      'module.b[10].t.n',
    ];
    expect(
      collapseToGlobs(
        ['module.a["x"].t.n', 'module.a["x"].t.m', 'module.b[1].t.n', 'module.b[1].t.m'],
        universe,
      ),
    ).toEqual(['module.a["x"].*', 'module.b[1].*']);
  });

  it('lets the outermost complete module win over inner ones', () => {
    const universe = ['module.a.module.b.t.x', 'module.a.module.b.t.y', 'module.a.t.z'];
    expect(collapseToGlobs(universe, universe)).toEqual(['module.a.*']);
    expect(collapseToGlobs(['module.a.module.b.t.x', 'module.a.module.b.t.y'], universe)).toEqual([
      'module.a.module.b.*',
    ]);
  });

  it('keeps a lone address literal: one glob is no smaller than one address', () => {
    expect(collapseToGlobs(['module.web.a.x'], ['module.web.a.x'])).toEqual(['module.web.a.x']);
  });

  it('reserves a deposed object through its instance address', () => {
    expect(
      collapseToGlobs(
        ['t.x (deposed object 00000001)', 't.x'],
        ['t.x', 't.x (deposed object 00000001)'],
      ),
    ).toEqual(['t.x']);
  });

  it('reserves nothing for nothing', () => {
    expect(collapseToGlobs([], ['a.b'])).toEqual([]);
  });
});
