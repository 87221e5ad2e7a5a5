import * as assert from 'assert';

import { RewriteServer, SERVER_COMMANDS } from '../src/commands';
import { applyCodeBlock } from '../src/snippet';
import { Position, Selection, TextDocument, TextEditor, ui, window, workspace } from './vscode-mock';

type Call = { command: string; args: unknown[] };

function fakeServer(answer: unknown = { status: 'proposed', proposal: 'p1', hunks: 1 }) {
  const calls: Call[] = [];
  const server: RewriteServer = {
    executeCommand: async (command, args) => {
      calls.push({ command, args });
      return answer;
    },
    uriOf: (document) => document.uri.toString(),
  };
  return { server, calls };
}

const CODE = 'def area(self):\n    return math.pi * self.r ** 2\n';

function open(...documents: TextDocument[]): TextEditor[] {
  const editors = documents.map((document) => new TextEditor(document));
  workspace.textDocuments = documents;
  window.visibleTextEditors = editors;
  window.activeTextEditor = editors[0];
  return editors;
}

describe('Apply Code Block to File', () => {
  beforeEach(() => ui.reset());

  it('applies the clipboard to the active file', async () => {
    const circle = new TextDocument('/project/circle.py', 'import math\n');
    open(circle);
    ui.clipboard = '```python\n' + CODE + '```';
    const { server, calls } = fakeServer();
    await applyCodeBlock(() => server);
    assert.deepStrictEqual(calls, [{ command: SERVER_COMMANDS.applySnippet, args: [{ uri: 'file:///project/circle.py', snippet: CODE }] }]);
    assert.deepStrictEqual(ui.quickPicks, []);
  });

  it('applies a selection in another editor to the open file picked', async () => {
    const answer = new TextDocument('/project/answer.md', 'Try this:\n```python\n' + CODE + '```\n');
    const circle = new TextDocument('/project/circle.py', 'import math\n');
    const square = new TextDocument('/project/square.py', '');
    const [chat] = open(answer, circle);
    workspace.textDocuments = [answer, square, circle];
    chat.selection = new Selection(new Position(1, 0), new Position(5, 0));
    ui.pickAnswer = (items) => items.find((item: { label: string }) => item.label === 'circle.py');
    const { server, calls } = fakeServer();
    await applyCodeBlock(() => server);
    // The visible file first, the source itself not offered.
    assert.deepStrictEqual(ui.quickPicks[0].map((item: { label: string }) => item.label), ['circle.py', 'square.py']);
    assert.deepStrictEqual(calls, [{ command: SERVER_COMMANDS.applySnippet, args: [{ uri: 'file:///project/circle.py', snippet: CODE }] }]);
    assert.deepStrictEqual(ui.shownDocuments, [circle]); // its review shows there
  });

  it('applies nothing when the pick is dismissed, or no other file is open', async () => {
    const answer = new TextDocument('/project/answer.md', CODE);
    const [chat] = open(answer, new TextDocument('/project/circle.py', ''));
    chat.selection = new Selection(new Position(0, 0), new Position(1, 0));
    ui.pickAnswer = () => undefined;
    const { server, calls } = fakeServer();
    await applyCodeBlock(() => server);
    open(answer);
    chat.selection = new Selection(new Position(0, 0), new Position(1, 0));
    window.activeTextEditor = chat;
    await applyCodeBlock(() => server);
    assert.deepStrictEqual(calls, []);
    assert.match(ui.shown[0].message, /open the file the code block goes to/);
  });

  it('says so when the clipboard is empty, or the code block changes nothing', async () => {
    open(new TextDocument('/project/circle.py', CODE));
    const { server, calls } = fakeServer({ status: 'unchanged' });
    ui.clipboard = '  \n';
    await applyCodeBlock(() => server);
    assert.deepStrictEqual(calls, []);
    ui.clipboard = CODE;
    await applyCodeBlock(() => server);
    assert.strictEqual(calls.length, 1);
    assert.deepStrictEqual(ui.shown.map((s) => s.message), [
      'rewriter: no code block to apply: select one, or copy it to the clipboard',
      'rewriter: the code block changes nothing in this file',
    ]);
  });

  it("shows the server's error", async () => {
    open(new TextDocument('/project/circle.py', ''));
    ui.clipboard = CODE;
    const server: RewriteServer = {
      executeCommand: async () => { throw new Error('the snippet matches nothing in the file'); },
      uriOf: (document) => document.uri.toString(),
    };
    assert.strictEqual(await applyCodeBlock(() => server), undefined);
    assert.deepStrictEqual(ui.shown, [{ kind: 'error', message: 'rewriter: the snippet matches nothing in the file', items: [] }]);
  });
});
