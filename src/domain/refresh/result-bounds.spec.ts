import {
  changedPathsProblem,
  MAX_CHANGED_PATH_CHARS,
  MAX_CHANGED_PATHS,
  MAX_CHANGED_PATHS_CHARS,
} from './result-bounds';

describe('changedPathsProblem', () => {
  it('takes what a provider sends, up to each bound', () => {
    expect(changedPathsProblem([])).toBeNull();
    expect(changedPathsProblem(['tags.Name', 'ingress[0].from_port'])).toBeNull();
    expect(changedPathsProblem(Array.from({ length: MAX_CHANGED_PATHS }, () => 'a'))).toBeNull();
    expect(changedPathsProblem(['x'.repeat(MAX_CHANGED_PATH_CHARS)])).toBeNull();
    const fill = MAX_CHANGED_PATHS_CHARS / MAX_CHANGED_PATH_CHARS;
    expect(changedPathsProblem(Array(fill).fill('x'.repeat(MAX_CHANGED_PATH_CHARS)))).toBeNull();
  });

  it('names the bound a list breaks', () => {
    expect(changedPathsProblem(Array.from({ length: MAX_CHANGED_PATHS + 1 }, () => 'a'))).toBe(
      'has 100001 paths, more than 100000',
    );
    expect(changedPathsProblem(['id', 'x'.repeat(MAX_CHANGED_PATH_CHARS + 1)])).toBe(
      'has a path longer than 4096 characters (at 1)',
    );
    const fill = MAX_CHANGED_PATHS_CHARS / MAX_CHANGED_PATH_CHARS;
    const over = [...Array(fill).fill('x'.repeat(MAX_CHANGED_PATH_CHARS)), 'y'];
    expect(changedPathsProblem(over)).toBe('has more than 16777216 characters in all');
  });
});
