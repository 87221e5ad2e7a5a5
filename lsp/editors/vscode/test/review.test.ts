import * as assert from 'assert';
import * as vscode from 'vscode';

import { RewriteServer, SERVER_COMMANDS } from '../src/commands';
import { Proposal } from '../src/proposal';
import { REVIEW_COMMANDS, REVIEWING, Review } from '../src/review';
import { CIRCLE, lineHunk } from './proposal.test';
import { CodeLens, TextDocument, TextEditor, ui, window, workspace } from './vscode-mock';

type Call = { command: string; args: unknown[] };
const URI = 'file:///project/circle.py';

function fakeServer(answer: (call: Call) => unknown = () => ({ status: 'ok', message: '', remaining: 1 })) {
  const calls: Call[] = [];
  const server: RewriteServer = {
    executeCommand: async (command, args) => {
      calls.push({ command, args });
      return answer({ command, args });
    },
    uriOf: (document) => document.uri.toString(),
  };
  return { server, calls };
}

/** Two hunks as the server streams them: the area squared, the perimeter with math.tau. */
function proposal(overrides: Partial<Proposal> = {}): Proposal {
  return {
    id: 'p1', uri: URI, version: 1, final: true, instruction: 'Square the radius',
    hunks: [lineHunk('h1', 8, 9, ['        return math.pi * self.r ** 2']),
      lineHunk('h2', 11, 12, ['        return math.tau * self.r'])],
    ...overrides,
  };
}

function setUp(answer?: (call: Call) => unknown) {
  ui.reset();
  const document = new TextDocument('/project/circle.py', CIRCLE);
  const editor = new TextEditor(document, [11, 4]);
  window.activeTextEditor = editor;
  window.visibleTextEditors = [editor];
  workspace.textDocuments = [document];
  const { server, calls } = fakeServer(answer);
  const review = new Review(() => server);
  return { document, editor, review, calls };
}

function decorations(editor: TextEditor): { removed: unknown[]; inserted: { range: vscode.Range; renderOptions: { after: { contentText: string } } }[] } {
  const [removed, inserted] = [...editor.decorations.values()];
  return { removed, inserted } as never;
}

function titles(lenses: vscode.CodeLens[]): string[] {
  return lenses.map((lens) => `${lens.range.start.line}:${lens.command?.title}`);
}

describe('a proposal under review', () => {
  it('shows its hunks in the editor without changing the document', () => {
    const { document, editor, review } = setUp();
    review.onProposal(proposal());
    assert.strictEqual(document.text, CIRCLE);
    const { removed, inserted } = decorations(editor);
    assert.strictEqual(removed.length, 2);
    assert.deepStrictEqual(inserted.map((d) => [d.range.start.line, d.renderOptions.after.contentText]),
      [[8, 'return math.pi * self.r ** 2'], [11, 'return math.tau * self.r']]);
    assert.strictEqual(ui.context.get(REVIEWING), true);
    assert.match(review.item.text, /Review: 2 changes/);
  });

  it('puts Accept | Reject above each hunk, and the commands for all above the first', () => {
    const { document, review } = setUp();
    review.onProposal(proposal());
    const lenses = review.provideCodeLenses(document as unknown as vscode.TextDocument);
    assert.deepStrictEqual(titles(lenses),
      ['8:Accept', '8:Reject', '8:Accept All', '8:Reject All', '8:Refine…', '8:Try Another', '11:Accept', '11:Reject']);
    assert.deepStrictEqual((lenses[5] as unknown as CodeLens).command,
      { title: 'Try Another', command: REVIEW_COMMANDS.tryAnother, arguments: [] });
    assert.deepStrictEqual((lenses[7] as unknown as CodeLens).command,
      { title: 'Reject', command: REVIEW_COMMANDS.rejectHunk, arguments: [{ proposal: 'p1', hunk: 'h2' }] });
  });

  it('says it is still rewriting while the hunks stream', () => {
    const { document, review } = setUp();
    review.onProposal(proposal({ final: false, hunks: proposal().hunks.slice(0, 1) }));
    assert.deepStrictEqual(titles(review.provideCodeLenses(document as never)).slice(-1), ['8:$(sync~spin) rewriting…']);
    assert.match(review.item.text, /Review: 1 change \(rewriting…\)/);
  });

  it('does not show a hunk where the document no longer holds its old text', () => {
    const { document, editor, review } = setUp();
    document.text = CIRCLE.replace('2 * math.pi', '2.0 * math.pi'); // typed inside the second hunk
    review.onProposal(proposal());
    assert.deepStrictEqual(review.placed(document as never).map((hunk) => hunk.id), ['h1']);
    assert.strictEqual(decorations(editor).removed.length, 1);
  });

  it('clears everything when the review ends, and warns when it went stale', () => {
    const { document, editor, review } = setUp();
    review.onProposal(proposal());
    review.onProposalEnded({ id: 'p1', uri: URI, reason: 'stale', message: 'you edited a line under review' });
    assert.deepStrictEqual(decorations(editor), { removed: [], inserted: [] });
    assert.deepStrictEqual(review.provideCodeLenses(document as never), []);
    assert.strictEqual(ui.context.get(REVIEWING), false);
    assert.strictEqual((review.item as unknown as { visible: boolean }).visible, false);
    assert.deepStrictEqual(ui.shown.map((s) => s.message), ['rewriter: you edited a line under review']);
  });

  it("ignores the end of a proposal it no longer shows (a newer one replaced it)", () => {
    const { document, review } = setUp();
    review.onProposal(proposal({ id: 'p2' }));
    review.onProposalEnded({ id: 'p1', uri: URI, reason: 'superseded', message: '' });
    assert.strictEqual(review.provideCodeLenses(document as never).length, 8);
    assert.deepStrictEqual(ui.shown, []);
  });
});

describe('accept, reject and refine', () => {
  it('send the hunk a lens names to the server', async () => {
    const { review, calls } = setUp();
    review.onProposal(proposal());
    await review.decideHunk(true, { proposal: 'p1', hunk: 'h2' });
    await review.decideHunk(false, { proposal: 'p1', hunk: 'h1' });
    assert.deepStrictEqual(calls, [
      { command: SERVER_COMMANDS.acceptHunk, args: [{ proposal: 'p1', hunk: 'h2' }] },
      { command: SERVER_COMMANDS.rejectHunk, args: [{ proposal: 'p1', hunk: 'h1' }] },
    ]);
  });

  it('take the hunk at the cursor when called from the keyboard', async () => {
    const { review, calls, editor } = setUp();
    review.onProposal(proposal());
    await review.decideHunk(false);
    editor.selection = new vscode.Selection(new vscode.Position(2, 0), new vscode.Position(2, 0));
    await review.decideHunk(true);
    assert.deepStrictEqual(calls.map((call) => call.args[0]),
      [{ proposal: 'p1', hunk: 'h2' }, { proposal: 'p1', hunk: 'h1' }]);
  });

  it('accept or reject all of the active file, and refine it with a follow-up', async () => {
    const { review, calls } = setUp();
    review.onProposal(proposal());
    await review.decideAll(true);
    await review.decideAll(false);
    ui.inputAnswer = '  use math.tau  ';
    await review.refine();
    assert.deepStrictEqual(calls, [
      { command: SERVER_COMMANDS.acceptAll, args: [{ proposal: 'p1' }] },
      { command: SERVER_COMMANDS.rejectAll, args: [{ proposal: 'p1' }] },
      { command: SERVER_COMMANDS.refine, args: [{ proposal: 'p1', instruction: 'use math.tau' }] },
    ]);
    assert.match(ui.inputBoxes[0].prompt, /Square the radius/);
  });

  it('refine nothing when the follow-up is dismissed', async () => {
    const { review, calls } = setUp();
    review.onProposal(proposal());
    ui.inputAnswer = undefined;
    assert.strictEqual(await review.refine(), undefined);
    assert.deepStrictEqual(calls, []);
  });

  it('try another candidate for the proposal of the active file', async () => {
    const { review, calls } = setUp();
    review.onProposal(proposal());
    await review.tryAnother();
    assert.deepStrictEqual(calls, [{ command: SERVER_COMMANDS.tryAnother, args: [{ proposal: 'p1' }] }]);
  });

  it('say so when nothing is under review, and call nothing', async () => {
    const { review, calls } = setUp();
    await review.decideAll(true);
    await review.decideHunk(true);
    await review.refine();
    await review.tryAnother();
    assert.deepStrictEqual(calls, []);
    assert.strictEqual(ui.shown.length, 4);
    assert.match(ui.shown[0].message, /no rewrite is under review/);
  });

  it('show a stale answer, and stop showing a proposal the server does not know', async () => {
    let status = 'stale';
    const { document, review } = setUp(() => ({ status, message: `the proposal is ${status}`, remaining: 2 }));
    review.onProposal(proposal());
    await review.decideHunk(true, { proposal: 'p1', hunk: 'h1' });
    assert.strictEqual(review.provideCodeLenses(document as never).length, 8); // still under review
    status = 'unknown';
    await review.decideAll(false);
    assert.deepStrictEqual(review.provideCodeLenses(document as never), []);
    assert.deepStrictEqual(ui.shown.map((s) => s.message), ['rewriter: the proposal is stale', 'rewriter: the proposal is unknown']);
  });
});

describe('saving while a proposal is under review', () => {
  it('saves only what was accepted, and says once what is still under review', async () => {
    const { document, review, calls } = setUp();
    review.onProposal(proposal());
    ui.messageAnswer = 'Reject All';
    review.onWillSave(document as never);
    review.onWillSave(document as never);
    await new Promise((resolve) => setImmediate(resolve));
    assert.strictEqual(document.text, CIRCLE); // nothing of the proposal is in what is saved
    assert.strictEqual(ui.shown.length, 1);
    assert.match(ui.shown[0].message, /saved without the 2 changes still under review/);
    assert.deepStrictEqual(ui.shown[0].items, ['Accept All', 'Reject All']);
    assert.deepStrictEqual(calls, [{ command: SERVER_COMMANDS.rejectAll, args: [{ proposal: 'p1' }] }]);
  });

  it('says nothing when no hunk is under review', () => {
    const { document, review } = setUp();
    review.onWillSave(document as never);
    review.onProposal(proposal({ hunks: [] }));
    review.onWillSave(document as never);
    assert.deepStrictEqual(ui.shown, []);
  });
});

describe('the diff editor', () => {
  it('shows the document with every hunk under review applied', async () => {
    const { document, review } = setUp();
    review.onProposal(proposal());
    await review.showDiff();
    const [{ id, args }] = ui.executed;
    assert.strictEqual(id, 'vscode.diff');
    assert.strictEqual(args[0], document.uri);
    assert.strictEqual(review.provideTextDocumentContent(args[1]),
      CIRCLE.replace('self.r * self.r', 'self.r ** 2').replace('2 * math.pi', 'math.tau'));
  });
});
