import * as assert from 'assert';

import { ProgressTracker, ProgressValue, Token } from '../src/progress';
import { Disposable, StatusBarItem, ui } from './vscode-mock';

const shown = (item: unknown) => (item as StatusBarItem).visible;

/** The client's side of $/progress: tests send values for a token; cancels are recorded. */
function fakeChannel() {
  const handlers = new Map<Token, (value: ProgressValue) => void>();
  const cancelled: Token[] = [];
  return {
    cancelled,
    send: (token: Token, value: ProgressValue) => handlers.get(token)?.(value),
    listening: () => [...handlers.keys()],
    channel: {
      onProgress: (token: Token, handler: (value: ProgressValue) => void) => {
        handlers.set(token, handler);
        return new Disposable(() => handlers.delete(token));
      },
      cancel: (token: Token) => { cancelled.push(token); },
    },
  };
}

describe('progress in the status bar', () => {
  beforeEach(() => ui.reset());

  it('shows a rewrite from begin to end, with Cancel', () => {
    const fake = fakeChannel();
    const tracker = new ProgressTracker(fake.channel);
    assert.ok(!shown(tracker.item) && !shown(tracker.cancelItem));
    tracker.track('rewriter/1');
    fake.send('rewriter/1', { kind: 'begin', title: 'Rewrite: Add docstrings', cancellable: true, message: 'starting', percentage: 0 });
    assert.ok(shown(tracker.item) && shown(tracker.cancelItem));
    assert.strictEqual(tracker.item.text, '$(sync~spin) Rewrite: Add docstrings 0%');
    fake.send('rewriter/1', { kind: 'report', message: '40 tokens, 12.0 tok/s', percentage: 40, cancellable: true });
    assert.strictEqual(tracker.item.text, '$(sync~spin) Rewrite: Add docstrings 40%');
    assert.strictEqual(tracker.item.tooltip, 'Rewrite: Add docstrings: 40 tokens, 12.0 tok/s');
    assert.strictEqual(tracker.cancelItem.command, 'rewriter.client.cancelProgress');
    fake.send('rewriter/1', { kind: 'end', message: 'rewrote' });
    assert.ok(!shown(tracker.item) && !shown(tracker.cancelItem));
    assert.deepStrictEqual(fake.listening(), [], 'the listener is disposed at the end');
    tracker.dispose();
  });

  it('cancels every cancellable rewrite it shows', () => {
    const fake = fakeChannel();
    const tracker = new ProgressTracker(fake.channel);
    tracker.track('rewriter/1');
    tracker.track(7);
    fake.send('rewriter/1', { kind: 'begin', title: 'Rewrite: Simplify', cancellable: true });
    fake.send(7, { kind: 'begin', title: 'Loading', cancellable: false });
    assert.strictEqual(tracker.item.text, '$(sync~spin) Loading (+1 more)');
    assert.strictEqual(tracker.cancelAll(), 1);
    assert.deepStrictEqual(fake.cancelled, ['rewriter/1']);
    tracker.dispose();
  });

  it('shows no Cancel for progress that cannot be cancelled', () => {
    const fake = fakeChannel();
    const tracker = new ProgressTracker(fake.channel);
    tracker.track('t');
    fake.send('t', { kind: 'begin', title: 'Indexing' });
    assert.ok(shown(tracker.item) && !shown(tracker.cancelItem));
    tracker.dispose();
  });

  it('forgets what a stopped client was showing', () => {
    const fake = fakeChannel();
    const tracker = new ProgressTracker(fake.channel);
    tracker.track('rewriter/1');
    fake.send('rewriter/1', { kind: 'begin', title: 'Rewrite: Simplify', cancellable: true });
    tracker.connect(undefined);
    assert.ok(!shown(tracker.item));
    assert.deepStrictEqual(tracker.tokens, []);
    assert.strictEqual(tracker.cancelAll(), 0);
    tracker.dispose();
  });
});
