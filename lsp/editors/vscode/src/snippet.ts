// "Apply Code Block to File": a chat model's code block merged into a file by the server
// (rewriter.applySnippet: the deterministic merge, the model only where it is ambiguous). The
// block is the selection when one is made (in a chat answer, a markdown file, …: then the file
// it goes to is picked from the open ones), else the clipboard, applied to the active file. With
// review on, the result comes as a proposal to accept or reject like a rewrite's.
import * as vscode from 'vscode';

import { RewriteServer, SERVER_COMMANDS } from './commands';
import { codeBlock } from './proposal';

export const APPLY_CODE_BLOCK = 'rewriter.client.applyCodeBlock';

interface SnippetAnswer { status?: string; message?: string }

interface FilePick extends vscode.QuickPickItem { document: vscode.TextDocument }

/** The open files a code block can go to, those in sight first. */
function targets(source: vscode.TextDocument): vscode.TextDocument[] {
  const editable = (document: vscode.TextDocument) =>
    document !== source && !document.isClosed && (document.uri.scheme === 'file' || document.uri.scheme === 'untitled');
  const visible = (vscode.window.visibleTextEditors as vscode.TextEditor[]).map((editor) => editor.document).filter(editable);
  const others = (vscode.workspace.textDocuments as vscode.TextDocument[]).filter((d) => editable(d) && !visible.includes(d));
  return [...new Set([...visible, ...others])];
}

async function pickTarget(source: vscode.TextDocument): Promise<vscode.TextDocument | undefined> {
  const documents = targets(source);
  if (documents.length === 0) {
    void vscode.window.showWarningMessage('rewriter: open the file the code block goes to, then apply it again');
    return undefined;
  }
  const picked = await vscode.window.showQuickPick<FilePick>(documents.map((document) => ({
    label: vscode.workspace.asRelativePath(document.uri),
    description: document.isDirty ? 'unsaved changes' : undefined,
    document,
  })), { title: 'Rewriter: apply the selected code block to…', placeHolder: 'an open file' });
  return picked?.document;
}

/** The code block and the file it goes to; undefined when the user stopped or there is none. */
async function blockAndTarget(): Promise<{ snippet: string; target: vscode.TextDocument } | undefined> {
  const active = vscode.window.activeTextEditor;
  if (active && !active.selection.isEmpty) {
    const snippet = codeBlock(active.document.getText(active.selection));
    const target = await pickTarget(active.document);
    return target && { snippet, target };
  }
  if (!active) {
    void vscode.window.showWarningMessage('rewriter: open the file the code block goes to first');
    return undefined;
  }
  return { snippet: codeBlock(await vscode.env.clipboard.readText()), target: active.document };
}

export async function applyCodeBlock(server: () => RewriteServer | undefined): Promise<SnippetAnswer | undefined> {
  const chosen = await blockAndTarget();
  if (!chosen) {
    return undefined;
  }
  if (!chosen.snippet.trim()) {
    void vscode.window.showWarningMessage('rewriter: no code block to apply: select one, or copy it to the clipboard');
    return undefined;
  }
  const running = server();
  if (!running) {
    void vscode.window.showWarningMessage('rewriter: the language server is not running (see the "Rewriter" output)');
    return undefined;
  }
  await vscode.window.showTextDocument(chosen.target); // where its review shows
  let answer: SnippetAnswer;
  try {
    answer = (await running.executeCommand(SERVER_COMMANDS.applySnippet,
      [{ uri: running.uriOf(chosen.target), snippet: chosen.snippet }])) as SnippetAnswer;
  } catch (error) {
    void vscode.window.showErrorMessage(`rewriter: ${error instanceof Error ? error.message : String(error)}`);
    return undefined;
  }
  if (answer?.status === 'unchanged') {
    void vscode.window.showInformationMessage('rewriter: the code block changes nothing in this file');
  }
  return answer;
}
