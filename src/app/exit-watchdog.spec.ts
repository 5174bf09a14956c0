import { armExitWatchdog } from './exit-watchdog';

describe('exit watchdog of one-shot kld commands', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  function io(open: string[]) {
    const lines: string[] = [];
    const codes: number[] = [];
    return {
      lines,
      codes,
      io: {
        openResources: () => open,
        write: (l: string) => lines.push(l),
        exit: (c: number) => codes.push(c),
      },
    };
  }

  it('says what is still open and exits 1 once the grace has passed', () => {
    const w = io(['TCPSocketWrap', 'ConnectWrap', 'TCPSocketWrap']);
    armExitWatchdog('token create', 10_000, w.io);
    jest.advanceTimersByTime(9_999);
    expect(w.codes).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(w.lines).toEqual([
      'kld: token create finished but did not exit within 10 s ' +
        '(still open: TCPSocketWrap ×2, ConnectWrap); exiting\n',
    ]);
    expect(w.codes).toEqual([1]);
  });

  it('keeps nothing running itself: a process with nothing else open exits before it fires', () => {
    const w = io([]);
    expect(armExitWatchdog('migrate', 10_000, w.io).hasRef()).toBe(false);
  });
});
