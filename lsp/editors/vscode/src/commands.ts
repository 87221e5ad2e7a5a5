// The extension's commands. They ask for what the server's commands need (the instruction,
// the range) and call those; the server applies the edits, reports progress and says how the
// rewrite ended (window/showMessage), and asks about a refused edit (window/showMessageRequest).
import * as vscode from 'vscode';

import { CANCEL_PROGRESS, ProgressTracker } from './progress';

// The server's command ids (lsp/rewrite_commands.py, lsp/proposal_commands.py); vscode-languageclient
// registers them as VS Code commands, so the extension's own must be different ones.
export const SERVER_COMMANDS = {
  rewrite: 'rewriter.rewrite',
  rewriteFile: 'rewriter.rewriteFile',
  cancel: 'rewriter.cancel',
  wait: 'rewriter.wait',
  // Review before apply (review.ts) and Apply Code Block to File (snippet.ts).
  acceptHunk: 'rewriter.acceptHunk',
  rejectHunk: 'rewriter.rejectHunk',
  acceptAll: 'rewriter.acceptAll',
  rejectAll: 'rewriter.rejectAll',
  refine: 'rewriter.refine',
  tryAnother: 'rewriter.tryAnother',
  applySnippet: 'rewriter.applySnippet',
} as const;

export const CLIENT_COMMANDS = {
  rewriteSelection: 'rewriter.client.rewriteSelection',
  rewriteFile: 'rewriter.client.rewriteFile',
  cancel: 'rewriter.client.cancel',
  restart: 'rewriter.client.restart',
  cancelProgress: CANCEL_PROGRESS,
} as const;

/** What the commands need from the running language client. */
export interface RewriteServer {
  executeCommand(command: string, args: unknown[]): Promise<unknown>;
  uriOf(document: vscode.TextDocument): string;
}

interface Answer { status?: string; message?: string; cancelled?: number }

export interface LspRange { start: { line: number; character: number }; end: { line: number; character: number } }

/** The selection as an LSP range; an empty selection stays empty: the server then rewrites the
 *  function or class around the cursor. */
export function selectionRange(selection: vscode.Selection): LspRange {
  return {
    start: { line: selection.start.line, character: selection.start.character },
    end: { line: selection.end.line, character: selection.end.character },
  };
}

export class Rewrites {
  private lastInstruction = '';

  constructor(private readonly server: () => RewriteServer | undefined) {}

  async rewriteSelection(editor = vscode.window.activeTextEditor): Promise<Answer | undefined> {
    const server = this.ready(editor);
    if (!server || !editor) {
      return undefined;
    }
    const whole = editor.selection.isEmpty ? 'the function or class at the cursor' : 'the selection';
    const instruction = await this.askInstruction(`Rewrite ${whole}: what should change?`);
    if (!instruction) {
      return undefined;
    }
    return this.call(server, SERVER_COMMANDS.rewrite, {
      uri: server.uriOf(editor.document), range: selectionRange(editor.selection), instruction,
    });
  }

  async rewriteFile(editor = vscode.window.activeTextEditor): Promise<Answer | undefined> {
    const server = this.ready(editor);
    if (!server || !editor) {
      return undefined;
    }
    const instruction = await this.askInstruction('Rewrite the whole file: what should change?');
    if (!instruction) {
      return undefined;
    }
    return this.call(server, SERVER_COMMANDS.rewriteFile, { uri: server.uriOf(editor.document), instruction });
  }

  /** Stop the rewrite in the active document; if none runs there, every rewrite. */
  async cancel(editor = vscode.window.activeTextEditor): Promise<number> {
    const server = this.server();
    if (!server) {
      void vscode.window.showWarningMessage('rewriter: the language server is not running');
      return 0;
    }
    let cancelled = 0;
    if (editor) {
      const answer = await this.call(server, SERVER_COMMANDS.cancel, { uri: server.uriOf(editor.document) });
      cancelled = answer?.cancelled ?? 0;
    }
    if (cancelled === 0) {
      const answer = await this.call(server, SERVER_COMMANDS.cancel);
      cancelled = answer?.cancelled ?? 0;
    }
    if (cancelled === 0) {
      void vscode.window.showInformationMessage('rewriter: no rewrite is running');
    }
    return cancelled;
  }

  private ready(editor: vscode.TextEditor | undefined): RewriteServer | undefined {
    if (!editor) {
      void vscode.window.showWarningMessage('rewriter: open a file to rewrite first');
      return undefined;
    }
    const server = this.server();
    if (!server) {
      void vscode.window.showWarningMessage('rewriter: the language server is not running (see the "Rewriter" output)');
    }
    return server;
  }

  private async askInstruction(prompt: string): Promise<string | undefined> {
    const typed = await vscode.window.showInputBox({
      title: 'Rewriter',
      prompt,
      placeHolder: 'e.g. Add type hints; use pathlib instead of os.path',
      value: this.lastInstruction,
      ignoreFocusOut: true,
    });
    const instruction = typed?.trim();
    if (instruction) {
      this.lastInstruction = instruction;
    }
    return instruction || undefined;
  }

  /** The server's answer; a refused or busy rewrite the server has already told the user about,
   *  an error (bad arguments) is shown here. */
  private async call(server: RewriteServer, command: string, argument?: object): Promise<Answer | undefined> {
    try {
      return (await server.executeCommand(command, argument === undefined ? [] : [argument])) as Answer;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      void vscode.window.showErrorMessage(`rewriter: ${message}`);
      return undefined;
    }
  }
}

/** Register the extension's commands; `restart` restarts the language server. */
export function registerCommands(rewrites: Rewrites, progress: ProgressTracker,
  restart: () => Promise<void>): vscode.Disposable[] {
  return [
    vscode.commands.registerCommand(CLIENT_COMMANDS.rewriteSelection, () => rewrites.rewriteSelection()),
    vscode.commands.registerCommand(CLIENT_COMMANDS.rewriteFile, () => rewrites.rewriteFile()),
    vscode.commands.registerCommand(CLIENT_COMMANDS.cancel, () => rewrites.cancel()),
    vscode.commands.registerCommand(CLIENT_COMMANDS.restart, restart),
    vscode.commands.registerCommand(CLIENT_COMMANDS.cancelProgress, () => progress.cancelAll()),
  ];
}
