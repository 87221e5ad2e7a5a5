import * as assert from 'assert';

import { codeBlock, diffMarkdown, Hunk, hunkNear, previews, proposedText } from '../src/proposal';

export const CIRCLE = [
  'import math', '', '', 'class Circle:', '    def __init__(self, r):', '        self.r = r', '',
  '    def area(self):', '        return math.pi * self.r * self.r', '',
  '    def perimeter(self):', '        return 2 * math.pi * self.r', '',
].join('\n');

const lineLength = (line: number) => CIRCLE.split('\n')[line].length;

/** A line hunk as the server sends it: lines [start, end) replaced by `newLines`. */
export function lineHunk(id: string, start: number, end: number, newLines: string[]): Hunk {
  const old = CIRCLE.split('\n').slice(start, end);
  return {
    id,
    range: { start: { line: start, character: 0 }, end: { line: end, character: 0 } },
    oldText: old.map((line) => `${line}\n`).join(''),
    newText: newLines.map((line) => `${line}\n`).join(''),
  };
}

function offsetAt(position: { line: number; character: number }): number {
  return CIRCLE.split('\n').slice(0, position.line).reduce((sum, line) => sum + line.length + 1, 0) + position.character;
}

describe('what the editor shows of a hunk', () => {
  it('follows each replaced line with its replacement, indentation left to the old line', () => {
    const hunk = lineHunk('1', 8, 9, ['        return math.pi * self.r ** 2']);
    assert.deepStrictEqual(previews(hunk, lineLength),
      [{ at: { line: 8, character: lineLength(8) }, text: 'return math.pi * self.r ** 2' }]);
  });

  it('joins the new lines beyond the replaced ones after the last replaced line', () => {
    const hunk = lineHunk('1', 7, 9, ['    def area(self) -> float:', '        """The area."""', '        return math.pi * self.r ** 2']);
    assert.deepStrictEqual(previews(hunk, lineLength), [
      { at: { line: 7, character: lineLength(7) }, text: 'def area(self) -> float:' },
      { at: { line: 8, character: lineLength(8) }, text: '"""The area.""" ⏎ return math.pi * self.r ** 2' },
    ]);
  });

  it('shows fewer new lines than replaced ones on the first lines only', () => {
    const hunk = lineHunk('1', 10, 12, ['    perimeter = property(lambda self: math.tau * self.r)']);
    assert.deepStrictEqual(previews(hunk, lineLength),
      [{ at: { line: 10, character: lineLength(10) }, text: 'perimeter = property(lambda self: math.tau * self.r)' }]);
  });

  it('shows an insertion where it goes, and nothing new for a deletion', () => {
    const insertion = lineHunk('1', 8, 8, ['        """The area."""']);
    assert.deepStrictEqual(previews(insertion, lineLength),
      [{ at: { line: 8, character: 0 }, text: '        """The area.""" ⏎ ' }]);
    assert.deepStrictEqual(previews(lineHunk('2', 9, 12, []), lineLength), []);
  });

  it('puts a change within a line beside the text it replaces', () => {
    const hunk: Hunk = { id: '1', range: { start: { line: 8, character: 26 }, end: { line: 8, character: 41 } },
      oldText: 'self.r * self.r', newText: 'self.r ** 2' };
    assert.deepStrictEqual(previews(hunk, lineLength), [{ at: { line: 8, character: 41 }, text: 'self.r ** 2' }]);
  });

  it('hovers as a diff, fenced longer than any backticks in it', () => {
    assert.strictEqual(diffMarkdown(lineHunk('1', 8, 9, ['        return math.pi * self.r ** 2'])),
      '```diff\n-        return math.pi * self.r * self.r\n+        return math.pi * self.r ** 2\n```');
    const hunk: Hunk = { id: '1', range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } },
      oldText: '', newText: '# ````\n' };
    assert.strictEqual(diffMarkdown(hunk), '`````diff\n+# ````\n`````');
  });
});

describe('the proposal', () => {
  it('is the document with every hunk applied', () => {
    const hunks = [lineHunk('a', 11, 12, ['        return math.tau * self.r']), lineHunk('b', 8, 9, ['        return math.pi * self.r ** 2'])];
    assert.strictEqual(proposedText(CIRCLE, hunks, offsetAt),
      CIRCLE.replace('self.r * self.r', 'self.r ** 2').replace('2 * math.pi', 'math.tau'));
    assert.strictEqual(proposedText(CIRCLE, [], offsetAt), CIRCLE);
  });

  it('finds the hunk at the cursor, else the next, else the last', () => {
    const hunks = [lineHunk('late', 11, 12, ['x']), lineHunk('early', 7, 9, ['y'])];
    assert.strictEqual(hunkNear(hunks, 8)?.id, 'early');
    assert.strictEqual(hunkNear(hunks, 0)?.id, 'early');
    assert.strictEqual(hunkNear(hunks, 10)?.id, 'late');
    assert.strictEqual(hunkNear(hunks, 12)?.id, 'late');
    assert.strictEqual(hunkNear([], 3), undefined);
  });
});

describe('a code block copied from a chat answer', () => {
  it('is the code inside its fence', () => {
    assert.strictEqual(codeBlock('```python\ndef area(self):\n    return 1\n```\n'), 'def area(self):\n    return 1\n');
    assert.strictEqual(codeBlock('  ~~~\nx = 1\n~~~'), 'x = 1\n');
  });

  it('is left as it is when it is plain code, or more than one block', () => {
    assert.strictEqual(codeBlock('def f():\n    pass\n'), 'def f():\n    pass\n');
    const two = '```py\na = 1\n```\nand then\n```py\nb = 2\n```';
    assert.strictEqual(codeBlock(two), two);
  });
});
