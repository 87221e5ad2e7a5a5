import * as assert from 'assert';
import * as vscode from 'vscode';

import { CLIENT_COMMANDS, registerCommands, RewriteServer, Rewrites, SERVER_COMMANDS } from '../src/commands';
import { NextEdit, registerNextEdit } from '../src/nextEdit';
import { ProgressTracker } from '../src/progress';
import { registerReview, Review } from '../src/review';
import { APPLY_CODE_BLOCK, applyCodeBlock } from '../src/snippet';
import { manifest } from './manifest';
import { Position, Selection, ui } from './vscode-mock';

type Call = { command: string; args: unknown[] };

/** The language client's side: records the server commands called, answers with `answer`. */
function fakeServer(answer: (call: Call) => unknown = () => ({ status: 'started', job: 1 })) {
  const calls: Call[] = [];
  const server: RewriteServer = {
    executeCommand: async (command, args) => {
      const call = { command, args };
      calls.push(call);
      return answer(call);
    },
    uriOf: (document) => `file://${document.fileName}`,
  };
  return { server, calls };
}

function editor(anchor: [number, number], active: [number, number] = anchor) {
  return {
    document: { fileName: '/project/shapes.py' },
    selection: new Selection(new Position(...anchor), new Position(...active)),
  } as unknown as vscode.TextEditor;
}

describe('Rewrite Selection…', () => {
  beforeEach(() => ui.reset());

  it('asks for the instruction and rewrites the selection with it', async () => {
    const { server, calls } = fakeServer();
    ui.inputAnswer = '  Use pathlib  ';
    const answer = await new Rewrites(() => server).rewriteSelection(editor([7, 12], [3, 0]));
    assert.deepStrictEqual(calls, [{
      command: SERVER_COMMANDS.rewrite,
      args: [{
        uri: 'file:///project/shapes.py',
        range: { start: { line: 3, character: 0 }, end: { line: 7, character: 12 } },
        instruction: 'Use pathlib',
      }],
    }]);
    assert.deepStrictEqual(answer, { status: 'started', job: 1 });
    assert.match(ui.inputBoxes[0].prompt, /the selection/);
  });

  it('sends an empty range at the cursor when nothing is selected (the function around it)', async () => {
    const { server, calls } = fakeServer();
    ui.inputAnswer = 'Add type hints';
    await new Rewrites(() => server).rewriteSelection(editor([5, 4]));
    assert.deepStrictEqual((calls[0].args[0] as { range: unknown }).range,
      { start: { line: 5, character: 4 }, end: { line: 5, character: 4 } });
    assert.match(ui.inputBoxes[0].prompt, /function or class at the cursor/);
  });

  it('does nothing when the input box is dismissed or left empty', async () => {
    const { server, calls } = fakeServer();
    const rewrites = new Rewrites(() => server);
    ui.inputAnswer = undefined;
    assert.strictEqual(await rewrites.rewriteSelection(editor([1, 0], [2, 0])), undefined);
    ui.inputAnswer = '   ';
    assert.strictEqual(await rewrites.rewriteSelection(editor([1, 0], [2, 0])), undefined);
    assert.deepStrictEqual(calls, []);
  });

  it('offers the last instruction again', async () => {
    const { server } = fakeServer();
    const rewrites = new Rewrites(() => server);
    ui.inputAnswer = 'Simplify';
    await rewrites.rewriteSelection(editor([1, 0], [2, 0]));
    await rewrites.rewriteFile(editor([0, 0]));
    assert.deepStrictEqual(ui.inputBoxes.map((box) => box.value), ['', 'Simplify']);
  });

  it("shows the server's error (a bad request) and goes on", async () => {
    const { server } = fakeServer(() => { throw new Error('file:///x.py is not open in the editor'); });
    ui.inputAnswer = 'Simplify';
    assert.strictEqual(await new Rewrites(() => server).rewriteSelection(editor([0, 0])), undefined);
    assert.deepStrictEqual(ui.shown, [{ kind: 'error', message: 'rewriter: file:///x.py is not open in the editor', items: [] }]);
  });

  it('says so when the server is not running, or no file is open', async () => {
    ui.inputAnswer = 'Simplify';
    await new Rewrites(() => undefined).rewriteSelection(editor([0, 0]));
    await new Rewrites(() => fakeServer().server).rewriteSelection(undefined);
    assert.deepStrictEqual(ui.shown.map((s) => s.kind), ['warning', 'warning']);
    assert.match(ui.shown[0].message, /not running/);
    assert.match(ui.shown[1].message, /open a file/);
    assert.deepStrictEqual(ui.inputBoxes, []);
  });
});

describe('Rewrite File… and Cancel Rewrite', () => {
  beforeEach(() => ui.reset());

  it('rewrites the whole file', async () => {
    const { server, calls } = fakeServer();
    ui.inputAnswer = 'Add docstrings';
    await new Rewrites(() => server).rewriteFile(editor([3, 3]));
    assert.deepStrictEqual(calls, [{
      command: SERVER_COMMANDS.rewriteFile, args: [{ uri: 'file:///project/shapes.py', instruction: 'Add docstrings' }],
    }]);
  });

  it("cancels the active document's rewrite", async () => {
    const { server, calls } = fakeServer(() => ({ cancelled: 1 }));
    assert.strictEqual(await new Rewrites(() => server).cancel(editor([0, 0])), 1);
    assert.deepStrictEqual(calls, [{ command: SERVER_COMMANDS.cancel, args: [{ uri: 'file:///project/shapes.py' }] }]);
    assert.deepStrictEqual(ui.shown, []);
  });

  it('cancels every rewrite when none runs in the active document', async () => {
    const { server, calls } = fakeServer((call) => ({ cancelled: call.args.length === 0 ? 2 : 0 }));
    assert.strictEqual(await new Rewrites(() => server).cancel(editor([0, 0])), 2);
    assert.deepStrictEqual(calls.map((c) => c.args), [[{ uri: 'file:///project/shapes.py' }], []]);
  });

  it('says when there was nothing to cancel', async () => {
    const { server } = fakeServer(() => ({ cancelled: 0 }));
    assert.strictEqual(await new Rewrites(() => server).cancel(undefined), 0);
    assert.deepStrictEqual(ui.shown.map((s) => s.message), ['rewriter: no rewrite is running']);
  });
});

describe('the commands', () => {
  beforeEach(() => ui.reset());

  it('are the ones package.json contributes, none of them a server command', async () => {
    const progress = new ProgressTracker();
    const disposables = [...registerCommands(new Rewrites(() => undefined), progress, async () => undefined),
      ...registerReview(new Review(() => undefined)), ...registerNextEdit(new NextEdit(() => undefined)),
      vscode.commands.registerCommand(APPLY_CODE_BLOCK, () => applyCodeBlock(() => undefined))];
    const registered = [...ui.commands.keys()].sort();
    const contributed = manifest.contributes.commands.map((c: { command: string }) => c.command);
    // The status bar's Cancel is an internal command: not in the palette.
    assert.deepStrictEqual(registered, [...contributed, CLIENT_COMMANDS.cancelProgress].sort());
    for (const id of registered) {
      assert.ok(!Object.values(SERVER_COMMANDS).includes(id as never), `${id} is a server command id`);
      assert.ok(id.startsWith('rewriter.client.'), id);
    }
    for (const used of [...manifest.contributes.menus['editor/context'], ...manifest.contributes.keybindings]) {
      assert.ok(registered.includes(used.command), used.command);
    }
    disposables.forEach((d) => d.dispose());
    progress.dispose();
  });
});
