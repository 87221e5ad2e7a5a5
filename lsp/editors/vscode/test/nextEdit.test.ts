import * as assert from 'assert';
import * as vscode from 'vscode';

import {
  ENABLED_SETTING, NEXT_EDIT_AWAY, NEXT_EDIT_COMMANDS, NEXT_EDIT_SHOWN, NextEdit, NextEditServer, registerNextEdit,
} from '../src/nextEdit';
import { InlineCompletionParams, InlineCompletionResult } from '../src/nextEditItem';
import { manifest, properties } from './manifest';
import {
  CancellationTokenSource, InlineCompletionItem, Position, Range, Selection, StatusBarItem, TextDocument, TextEditor, ui, window, workspace,
} from './vscode-mock';

const SHAPES = [
  'def area(r):', //                     0
  '    return 3.14 * r * r', //           1
  '', //                                  2
  '', //                                  3
  'def perimeter(r):', //                 4
  '    return 2 * 3.14 * r', //           5
  '',
].join('\n');

type Request = { params: InlineCompletionParams; token: vscode.CancellationToken };

/** The language client's side: records each request, answers with `answer` (a promise the test
 *  may hold back). */
function fakeServer(answer: (request: Request) => InlineCompletionResult | Promise<InlineCompletionResult>) {
  const requests: Request[] = [];
  const server: NextEditServer = {
    uriOf: (document) => document.uri.toString(),
    inlineCompletion: async (params, token) => {
      const request = { params, token };
      requests.push(request);
      return answer(request);
    },
  };
  return { server, requests };
}

const lines = (from: [number, number], to: [number, number]) => ({
  start: { line: from[0], character: from[1] }, end: { line: to[0], character: to[1] },
});

function setUp(answer: (request: Request) => InlineCompletionResult | Promise<InlineCompletionResult>, cursor: [number, number] = [1, 23]) {
  ui.reset();
  const document = new TextDocument('/project/shapes.py', SHAPES);
  const editor = new TextEditor(document, cursor);
  window.activeTextEditor = editor;
  window.visibleTextEditors = [editor];
  workspace.textDocuments = [document];
  const { server, requests } = fakeServer(answer);
  const nextEdit = new NextEdit(() => server, () => ui.settings.get('rewriter.nextEdit.enabled') !== false);
  return { document, editor, nextEdit, requests };
}

/** VS Code asking as the user types (triggerKind Automatic is 1 in its enum). */
function ask(nextEdit: NextEdit, document: TextDocument, at: [number, number], token = new CancellationTokenSource().token) {
  return nextEdit.provideInlineCompletionItems(document as unknown as vscode.TextDocument, new Position(...at) as vscode.Position,
    { triggerKind: 1, selectedCompletionInfo: undefined } as vscode.InlineCompletionContext, token as unknown as vscode.CancellationToken);
}

function shown(editor: TextEditor, nextEdit: NextEdit) {
  const texts = (type: unknown) => (editor.decorations.get(type) ?? []).map((d) => d.renderOptions?.after?.contentText);
  const lineOf = (type: unknown) => (editor.decorations.get(type) ?? []).map((d) => d.range.start.line);
  return {
    removed: (editor.decorations.get(nextEdit.removed) ?? []).map((d) => editor.document.getText(d.range)),
    inserted: texts(nextEdit.inserted),
    marker: lineOf(nextEdit.marker),
    hint: texts(nextEdit.hint),
  };
}

const nothingShown = { removed: [], inserted: [], marker: [], hint: [] };

describe('next-edit suggestions', () => {
  it('asks the server at the cursor, in LSP terms, and shows an insertion there as ghost text', async () => {
    const { document, editor, nextEdit, requests } = setUp(() => [{ insertText: '  # the area', range: lines([1, 23], [1, 23]) }]);
    const items = await ask(nextEdit, document, [1, 23]);
    assert.deepStrictEqual(requests.map((r) => r.params), [{
      textDocument: { uri: 'file:///project/shapes.py' }, position: { line: 1, character: 23 }, context: { triggerKind: 2 },
    }]);
    assert.strictEqual(items?.length, 1);
    const ghost = items![0] as unknown as InlineCompletionItem;
    assert.strictEqual(ghost.insertText, '  # the area');
    assert.deepStrictEqual(ghost.range, new Range(1, 23, 1, 23));
    assert.deepStrictEqual(shown(editor, nextEdit), nothingShown);
    assert.notStrictEqual(ui.context.get(NEXT_EDIT_SHOWN), true);
  });

  it('shows a whole line sent again with an insertion at the cursor as ghost text of the insertion', async () => {
    const { document, nextEdit } = setUp(() => ({ items: [{ insertText: 'def area(r: float):\n', range: lines([0, 0], [1, 0]) }] }));
    const items = await ask(nextEdit, document, [0, 10]);
    assert.deepStrictEqual(items?.map((item) => [(item as unknown as InlineCompletionItem).insertText, item.range]),
      [[': float', new Range(0, 10, 0, 10)]]);
  });

  it("shows a replacement on the cursor's line as an inline diff: the old text struck through, the new after it", async () => {
    const { document, editor, nextEdit } = setUp(() => [{ insertText: '    return 3.14 * r ** 2\n', range: lines([1, 0], [2, 0]) }]);
    assert.strictEqual(await ask(nextEdit, document, [1, 23]), undefined);
    assert.deepStrictEqual(shown(editor, nextEdit), { removed: [' r'], inserted: ['* 2'], marker: [], hint: [] });
    assert.strictEqual(ui.context.get(NEXT_EDIT_SHOWN), true);
    assert.strictEqual(ui.context.get(NEXT_EDIT_AWAY), false);
    assert.strictEqual(document.text, SHAPES, 'nothing is applied before it is accepted');
  });

  it('shows an edit away from the cursor as a marker; Tab goes there, then shows it as an inline diff', async () => {
    const { document, editor, nextEdit } = setUp(() => [{ insertText: '    return 2 * math.pi * r', range: lines([5, 0], [5, 23]) }]);
    await ask(nextEdit, document, [1, 23]);
    assert.deepStrictEqual(shown(editor, nextEdit),
      { removed: ['3.14'], inserted: ['math.pi'], marker: [5], hint: ['⇥ Tab: next edit at line 6'] });
    assert.strictEqual(ui.context.get(NEXT_EDIT_AWAY), true);
    assert.strictEqual(nextEdit.goTo(editor as unknown as vscode.TextEditor), true);
    assert.deepStrictEqual([editor.selection.active.line, editor.selection.active.character], [5, 15]);
    assert.deepStrictEqual(editor.revealed, [new Range(5, 15, 5, 19)]);
    assert.deepStrictEqual(shown(editor, nextEdit), { removed: ['3.14'], inserted: ['math.pi'], marker: [], hint: [] });
    assert.strictEqual(ui.context.get(NEXT_EDIT_AWAY), false);
    assert.strictEqual(ui.context.get(NEXT_EDIT_SHOWN), true);
  });

  it('draws the suggestion from where the cursor is when the answer comes', async () => {
    const { document, editor, nextEdit } = setUp(() => {
      editor.selection = new Selection(new Position(5, 2), new Position(5, 2)); // moved meanwhile, no typing
      return [{ insertText: '    return 2 * math.pi * r', range: lines([5, 0], [5, 23]) }];
    });
    await ask(nextEdit, document, [1, 23]);
    assert.deepStrictEqual(shown(editor, nextEdit), { removed: ['3.14'], inserted: ['math.pi'], marker: [], hint: [] });
  });

  it('applies the edit on accept, once, and shows nothing more', async () => {
    const { document, editor, nextEdit } = setUp(() => [{ insertText: '    return 3.14 * r ** 2\n', range: lines([1, 0], [2, 0]) }]);
    await ask(nextEdit, document, [1, 23]);
    assert.strictEqual(await nextEdit.accept(editor as unknown as vscode.TextEditor), true);
    assert.strictEqual(document.text, SHAPES.replace('3.14 * r * r', '3.14 * r ** 2'));
    assert.deepStrictEqual(shown(editor, nextEdit), nothingShown);
    assert.strictEqual(ui.context.get(NEXT_EDIT_SHOWN), false);
    assert.strictEqual(await nextEdit.accept(editor as unknown as vscode.TextEditor), false);
    assert.strictEqual(ui.appliedEdits.length, 1);
    // The next suggestion is asked for once, after the edit.
    assert.deepStrictEqual(ui.executed.map((e) => e.id), ['editor.action.inlineSuggest.trigger']);
  });

  it("runs the item's command after applying it", async () => {
    const command = { title: 'Log', command: 'rewriter.logAccepted', arguments: [{ id: 7 }] };
    const { document, editor, nextEdit } = setUp(() => [{ insertText: '    return 3.14 * r ** 2\n', range: lines([1, 0], [2, 0]), command }]);
    await ask(nextEdit, document, [1, 23]);
    await nextEdit.accept(editor as unknown as vscode.TextEditor);
    assert.deepStrictEqual(ui.executed.map((e) => [e.id, e.args]),
      [['rewriter.logAccepted', [{ id: 7 }]], ['editor.action.inlineSuggest.trigger', []]]);
  });

  it('drops a suggestion the document has changed since, without applying it', async () => {
    const { document, editor, nextEdit } = setUp(() => [{ insertText: '    return 3.14 * r ** 2\n', range: lines([1, 0], [2, 0]) }]);
    await ask(nextEdit, document, [1, 23]);
    document.type(new Range(0, 0, 0, 0), '# shapes\n'); // no change event reached it: the version alone tells
    assert.strictEqual(await nextEdit.accept(editor as unknown as vscode.TextEditor), false);
    assert.deepStrictEqual(ui.appliedEdits, []);
    assert.strictEqual(document.text, `# shapes\n${SHAPES}`);
    assert.deepStrictEqual(ui.executed, []);
    assert.deepStrictEqual(shown(editor, nextEdit), nothingShown);
  });

  it('stops showing a suggestion when the user types', async () => {
    const { document, editor, nextEdit } = setUp(() => [{ insertText: '    return 3.14 * r ** 2\n', range: lines([1, 0], [2, 0]) }]);
    await ask(nextEdit, document, [1, 23]);
    document.type(new Range(1, 23, 1, 23), ' ');
    nextEdit.onDidChange(document as unknown as vscode.TextDocument);
    assert.deepStrictEqual(shown(editor, nextEdit), nothingShown);
    assert.strictEqual(ui.context.get(NEXT_EDIT_SHOWN), false);
  });

  it('shows no answer that comes for an older version of the document', async () => {
    let typed = false;
    const { document, editor, nextEdit } = setUp(() => {
      document.type(new Range(1, 23, 1, 23), ' '); // the user typed while the server computed
      typed = true;
      return [{ insertText: '    return 3.14 * r ** 2\n', range: lines([1, 0], [2, 0]) }];
    });
    assert.strictEqual(await ask(nextEdit, document, [1, 23]), undefined);
    assert.ok(typed);
    assert.deepStrictEqual(shown(editor, nextEdit), nothingShown);
  });

  it('cancels the outstanding request when a newer keystroke asks, and shows only the newer answer', async () => {
    const answers: ((result: InlineCompletionResult) => void)[] = [];
    const { document, editor, nextEdit, requests } = setUp(() => new Promise((resolve) => answers.push(resolve)));
    const first = ask(nextEdit, document, [1, 23]);
    await Promise.resolve();
    assert.strictEqual((nextEdit.item as unknown as StatusBarItem).visible, true, 'the status bar says a suggestion is being computed');
    const second = ask(nextEdit, document, [1, 23]);
    await Promise.resolve();
    assert.deepStrictEqual(requests.map((r) => r.token.isCancellationRequested), [true, false]);
    answers[0]([{ insertText: '    return 2 * math.pi * r', range: lines([5, 0], [5, 23]) }]);
    assert.strictEqual(await first, undefined);
    assert.deepStrictEqual(shown(editor, nextEdit), nothingShown);
    assert.strictEqual((nextEdit.item as unknown as StatusBarItem).visible, true, 'the newer request is still outstanding');
    answers[1]([{ insertText: '    return 3.14 * r ** 2\n', range: lines([1, 0], [2, 0]) }]);
    await second;
    assert.deepStrictEqual(shown(editor, nextEdit).inserted, ['* 2']);
    assert.strictEqual((nextEdit.item as unknown as StatusBarItem).visible, false);
  });

  it("passes VS Code's own cancellation on", async () => {
    const { document, nextEdit, requests } = setUp(() => new Promise(() => undefined));
    const source = new CancellationTokenSource();
    void ask(nextEdit, document, [1, 23], source.token);
    await Promise.resolve();
    source.cancel();
    assert.strictEqual(requests[0].token.isCancellationRequested, true);
  });

  it('sends nothing while the setting is off, and hides what is shown when it is turned off', async () => {
    const { document, editor, nextEdit, requests } = setUp(() => [{ insertText: '    return 3.14 * r ** 2\n', range: lines([1, 0], [2, 0]) }]);
    await ask(nextEdit, document, [1, 23]);
    ui.settings.set('rewriter.nextEdit.enabled', false);
    nextEdit.onDidChangeSettings();
    assert.deepStrictEqual(shown(editor, nextEdit), nothingShown);
    assert.strictEqual(await ask(nextEdit, document, [1, 23]), undefined);
    assert.strictEqual(requests.length, 1);
  });

  it('reads the setting rewriter.nextEdit.enabled by default', async () => {
    const { document } = setUp(() => null);
    const { server, requests } = fakeServer(() => null);
    const reading = new NextEdit(() => server);
    await ask(reading, document, [1, 23]);
    ui.settings.set('rewriter.nextEdit.enabled', false);
    await ask(reading, document, [1, 23]);
    assert.strictEqual(requests.length, 1);
  });

  it('dismisses the suggestion on Esc', async () => {
    const { document, editor, nextEdit } = setUp(() => [{ insertText: '    return 2 * math.pi * r', range: lines([5, 0], [5, 23]) }]);
    const disposables = registerNextEdit(nextEdit);
    await ask(nextEdit, document, [1, 23]);
    assert.notDeepStrictEqual(shown(editor, nextEdit), nothingShown);
    await vscode.commands.executeCommand(NEXT_EDIT_COMMANDS.dismiss);
    assert.deepStrictEqual(shown(editor, nextEdit), nothingShown);
    assert.strictEqual(ui.context.get(NEXT_EDIT_SHOWN), false);
    assert.strictEqual(ui.context.get(NEXT_EDIT_AWAY), false);
    assert.strictEqual(await nextEdit.accept(editor as unknown as vscode.TextEditor), false);
    assert.strictEqual(document.text, SHAPES);
    assert.deepStrictEqual(ui.inlineCompletionProviders, [nextEdit]);
    disposables.forEach((d) => d.dispose());
  });

  it('shows nothing for null, an item that changes nothing, or a range outside the document', async () => {
    for (const answer of [null, [{ insertText: '    return 3.14 * r * r', range: lines([1, 0], [1, 23]) }],
      [{ insertText: 'x', range: lines([40, 0], [40, 1]) }], [{ insertText: 'x', range: lines([1, 30], [1, 31]) }]]) {
      const { document, editor, nextEdit } = setUp(() => answer);
      assert.strictEqual(await ask(nextEdit, document, [1, 23]), undefined, JSON.stringify(answer));
      assert.deepStrictEqual(shown(editor, nextEdit), nothingShown, JSON.stringify(answer));
    }
  });

  it('asks nothing when the server does not answer inline completions', async () => {
    ui.reset();
    const document = new TextDocument('/project/shapes.py', SHAPES);
    assert.strictEqual(await ask(new NextEdit(() => undefined, () => true), document, [1, 23]), undefined);
  });
});

describe('next-edit suggestions in package.json', () => {
  type Binding = { command: string; key: string; when: string };
  const bindings = (command: string): Binding[] => manifest.contributes.keybindings.filter((b: Binding) => b.command === command);
  const escaped = (key: string) => key.replace(/\./g, '\\.');

  it('binds Tab to go to a marker, Tab to accept, Esc to dismiss, each only while a suggestion is shown', () => {
    const [goTo] = bindings(NEXT_EDIT_COMMANDS.goTo);
    const [accept] = bindings(NEXT_EDIT_COMMANDS.accept);
    const [dismiss] = bindings(NEXT_EDIT_COMMANDS.dismiss);
    assert.deepStrictEqual([goTo.key, accept.key, dismiss.key], ['tab', 'tab', 'escape']);
    assert.match(goTo.when, new RegExp(`(^| )${escaped(NEXT_EDIT_AWAY)}( |$)`));
    assert.match(accept.when, new RegExp(`${escaped(NEXT_EDIT_SHOWN)} && !${escaped(NEXT_EDIT_AWAY)}`));
    assert.match(dismiss.when, new RegExp(escaped(NEXT_EDIT_SHOWN)));
    // Tab stays Tab for the suggest widget, VS Code's own ghost text and snippets.
    for (const tab of [goTo, accept]) {
      for (const other of ['!suggestWidgetVisible', '!inlineSuggestionVisible', '!inSnippetMode']) {
        assert.ok(tab.when.includes(other), `${tab.command}: ${other}`);
      }
    }
  });

  it('has the setting, on by default', () => {
    assert.deepStrictEqual([properties[`rewriter.${ENABLED_SETTING}`]?.default, (properties[`rewriter.${ENABLED_SETTING}`] as { type?: string })?.type],
      [true, 'boolean']);
  });
});
