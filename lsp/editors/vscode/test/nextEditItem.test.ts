import * as assert from 'assert';

import { firstItem, narrow, renderingOf } from '../src/nextEditItem';

const at = (line: number, character: number) => ({ line, character });
const range = (from: [number, number], to: [number, number]) => ({ start: at(...from), end: at(...to) });

describe("the server's inline completion items", () => {
  it('takes the first item of a list or an array, and none with a snippet or of null', () => {
    const item = { insertText: 'x', range: range([0, 0], [0, 0]) };
    assert.strictEqual(firstItem({ items: [item, { insertText: 'y' }] }), item);
    assert.strictEqual(firstItem([item]), item);
    assert.strictEqual(firstItem(null), undefined);
    assert.strictEqual(firstItem([]), undefined);
    assert.strictEqual(firstItem([{ insertText: { kind: 'snippet', value: '${1:x}' } }]), undefined);
  });
});

describe('what an item changes', () => {
  it('narrows a replacement to the characters that differ', () => {
    // "return a * a" (offset 10) becomes "return a ** 2".
    assert.deepStrictEqual(narrow(10, 'return a * a\n', 'return a ** 2\n', 10),
      { from: 20, to: 22, text: '* 2' });
  });

  it('places an insertion that fits at the cursor there, not where equal characters first allow', () => {
    // "aa|a": a fourth "a" could go anywhere; the cursor (offset 2) is where the user types.
    assert.deepStrictEqual(narrow(0, 'aaa', 'aaaa', 2), { from: 2, to: 2, text: 'a' });
    // The whole line sent again with an insertion in the middle.
    assert.deepStrictEqual(narrow(5, 'print()\n', 'print(total)\n', 11), { from: 11, to: 11, text: 'total' });
  });

  it('keeps an insertion elsewhere where it is', () => {
    assert.deepStrictEqual(narrow(0, 'def f(x):\n    return x\n', 'def f(x, y):\n    return x\n', 20),
      { from: 7, to: 7, text: ', y' });
  });

  it('is nothing when the item changes nothing', () => {
    assert.strictEqual(narrow(3, 'same\n', 'same\n', 3), undefined);
    assert.strictEqual(narrow(3, 'same\n', 'same\n', 40), undefined);
  });

  it('never splits a surrogate pair or a \\r\\n', () => {
    // 😀 is \ud83d\ude00, 😃 \ud83d\ude03: the same first half.
    assert.deepStrictEqual(narrow(0, 'x = "😀"', 'x = "😃"', 99), { from: 5, to: 7, text: '😃' });
    assert.deepStrictEqual(narrow(0, 'a\r\nb', 'a\nb', 99), { from: 1, to: 3, text: '\n' });
  });
});

describe('how a change is shown', () => {
  it('as ghost text when it inserts at the cursor', () => {
    assert.strictEqual(renderingOf(range([4, 8], [4, 8]), at(4, 8)), 'ghostText');
  });

  it("as an inline diff when it replaces text on the cursor's lines, or inserts beside the cursor", () => {
    assert.strictEqual(renderingOf(range([4, 2], [4, 6]), at(4, 8)), 'inlineDiff');
    assert.strictEqual(renderingOf(range([3, 0], [6, 0]), at(5, 1)), 'inlineDiff');
    assert.strictEqual(renderingOf(range([4, 2], [4, 2]), at(4, 8)), 'inlineDiff');
  });

  it('as a marker when it is away from the cursor', () => {
    assert.strictEqual(renderingOf(range([10, 0], [11, 4]), at(4, 8)), 'marker');
    // Whole lines 3-5: the range ends at line 6's start, which it leaves out.
    assert.strictEqual(renderingOf(range([3, 0], [6, 0]), at(6, 0)), 'marker');
  });
});
