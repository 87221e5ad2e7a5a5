// Next-edit suggestions: as the user types, asks the server (textDocument/inlineCompletion) what
// to change next, and shows its answer by its shape (nextEditItem.ts): an insertion at the cursor
// as VS Code's own ghost text; any other edit, which VS Code's inline completions cannot show (they
// only extend the text at the cursor), as an inline diff, or, away from the cursor, as a marker
// that Tab jumps to. Tab accepts, Esc dismisses; the edit is applied only to the document version
// it was computed for.
import * as vscode from 'vscode';

import { diffMarkdown, previews } from './proposal';
import {
  Change, firstItem, InlineCompletionItem, InlineCompletionParams, InlineCompletionResult, LspCommand,
  LspPosition, narrow, Rendering, renderingOf,
} from './nextEditItem';
import { SECTION } from './settings';

export const NEXT_EDIT_COMMANDS = {
  accept: 'rewriter.client.acceptNextEdit',
  goTo: 'rewriter.client.goToNextEdit',
  dismiss: 'rewriter.client.dismissNextEdit',
} as const;

/** Context keys for the keybindings: a suggestion is shown (Tab, Esc), and it is away (Tab jumps). */
export const NEXT_EDIT_SHOWN = 'rewriter.nextEditShown';
export const NEXT_EDIT_AWAY = 'rewriter.nextEditAway';
export const ENABLED_SETTING = 'nextEdit.enabled';
const TRIGGER_INLINE_SUGGEST = 'editor.action.inlineSuggest.trigger';

/** What the suggestions need from the running language client. */
export interface NextEditServer {
  uriOf(document: vscode.TextDocument): string;
  /** Sends the request; a cancelled token sends $/cancelRequest. */
  inlineCompletion(params: InlineCompletionParams, token: vscode.CancellationToken): Promise<InlineCompletionResult>;
}

/** A suggestion shown with decorations, for one version of its document. */
interface Shown {
  document: vscode.TextDocument;
  version: number;
  range: vscode.Range;
  text: string;
  command?: LspCommand;
  cursor: LspPosition;
}

function readEnabled(): boolean {
  return vscode.workspace.getConfiguration(SECTION).get<boolean>(ENABLED_SETTING, true) !== false;
}

function lspRange(range: vscode.Range): { start: LspPosition; end: LspPosition } {
  return {
    start: { line: range.start.line, character: range.start.character },
    end: { line: range.end.line, character: range.end.character },
  };
}

function emptyRange(at: LspPosition): vscode.Range {
  return new vscode.Range(at.line, at.character, at.line, at.character);
}

function vscodeCommand(command: LspCommand | undefined): vscode.Command | undefined {
  return command && { title: command.title, command: command.command, arguments: command.arguments };
}

export class NextEdit implements vscode.InlineCompletionItemProvider, vscode.Disposable {
  private outstanding: vscode.CancellationTokenSource | undefined;
  private shown: Shown | undefined;
  readonly item = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 47);
  readonly removed = vscode.window.createTextEditorDecorationType({
    backgroundColor: new vscode.ThemeColor('diffEditor.removedTextBackground'),
    textDecoration: 'line-through',
  });
  readonly inserted = vscode.window.createTextEditorDecorationType({
    after: {
      color: new vscode.ThemeColor('gitDecoration.addedResourceForeground'),
      backgroundColor: new vscode.ThemeColor('diffEditor.insertedTextBackground'),
      margin: '0 0 0 1em',
    },
  });
  readonly marker = vscode.window.createTextEditorDecorationType({
    isWholeLine: true,
    backgroundColor: new vscode.ThemeColor('diffEditor.insertedLineBackground'),
    overviewRulerColor: new vscode.ThemeColor('editorOverviewRuler.modifiedForeground'),
    overviewRulerLane: vscode.OverviewRulerLane.Full,
  });
  readonly hint = vscode.window.createTextEditorDecorationType({
    after: { color: new vscode.ThemeColor('editorCodeLens.foreground'), margin: '0 0 0 2em' },
  });

  constructor(private readonly server: () => NextEditServer | undefined,
    private readonly enabled: () => boolean = readEnabled,
    private readonly log: (message: string) => void = () => undefined) {
    this.item.name = 'Rewriter next edit';
    this.item.text = '$(sync~spin) Next edit';
    this.item.tooltip = 'Rewriter: computing a next-edit suggestion';
  }

  /** VS Code asks as the user types (automatic) or on Alt+\ (invoked). */
  async provideInlineCompletionItems(document: vscode.TextDocument, position: vscode.Position,
    context: vscode.InlineCompletionContext, token: vscode.CancellationToken): Promise<vscode.InlineCompletionItem[] | undefined> {
    this.outstanding?.cancel(); // a newer keystroke: the older answer would be stale
    const server = this.enabled() ? this.server() : undefined;
    if (!server) {
      return undefined;
    }
    const source = new vscode.CancellationTokenSource();
    const forwarded = token.onCancellationRequested(() => source.cancel());
    this.outstanding = source;
    this.item.show();
    const version = document.version;
    try {
      const result = await server.inlineCompletion(this.params(server, document, position, context), source.token);
      if (source.token.isCancellationRequested || document.version !== version) {
        return undefined;
      }
      return this.suggest(document, version, position, firstItem(result));
    } catch (error) {
      if (!source.token.isCancellationRequested) {
        this.log(`next edit: ${error instanceof Error ? error.message : String(error)}`);
      }
      return undefined;
    } finally {
      forwarded.dispose();
      if (this.outstanding === source) {
        this.outstanding = undefined;
        this.item.hide();
      }
      source.dispose();
    }
  }

  private params(server: NextEditServer, document: vscode.TextDocument, position: vscode.Position,
    context: vscode.InlineCompletionContext): InlineCompletionParams {
    const selected = context.selectedCompletionInfo;
    return {
      textDocument: { uri: server.uriOf(document) },
      position: { line: position.line, character: position.character },
      // VS Code's trigger kinds count from 0 (Invoke), LSP's from 1 (Invoked).
      context: {
        triggerKind: context.triggerKind + 1,
        ...(selected ? { selectedCompletionInfo: { range: lspRange(selected.range), text: selected.text } } : {}),
      },
    };
  }

  /** The item as ghost text (returned to VS Code), else shown here; nothing for an item that
   *  changes nothing or whose range is not in the document. */
  private suggest(document: vscode.TextDocument, version: number, position: vscode.Position,
    item: (InlineCompletionItem & { insertText: string }) | undefined): vscode.InlineCompletionItem[] | undefined {
    this.dismiss(); // a newer suggestion, or none
    const change = item && this.changeOf(document, position, item);
    if (!item || !change) {
      return undefined;
    }
    const [start, end] = [document.positionAt(change.from), document.positionAt(change.to)];
    const range = new vscode.Range(start.line, start.character, end.line, end.character);
    const cursor = { line: position.line, character: position.character };
    if (renderingOf(lspRange(range), cursor) === 'ghostText') {
      return [new vscode.InlineCompletionItem(change.text, emptyRange(cursor), vscodeCommand(item.command))];
    }
    // Drawn from where the cursor is now: it may have moved while the server computed.
    const editor = vscode.window.activeTextEditor;
    const now = editor?.document === document ? editor.selection.active : position;
    this.shown = { document, version, range, text: change.text, command: item.command, cursor: { line: now.line, character: now.character } };
    this.render();
    return undefined;
  }

  private changeOf(document: vscode.TextDocument, position: vscode.Position,
    item: InlineCompletionItem & { insertText: string }): Change | undefined {
    const { start, end } = item.range ?? lspRange(emptyRange(position));
    const inside = (at: LspPosition) => at.line >= 0 && at.line < document.lineCount
      && at.character >= 0 && at.character <= document.lineAt(at.line).text.length;
    if (!inside(start) || !inside(end) || start.line > end.line || (start.line === end.line && start.character > end.character)) {
      this.log(`next edit: an item's range is not in the document (${JSON.stringify(item.range)}); not shown`);
      return undefined;
    }
    const range = new vscode.Range(start.line, start.character, end.line, end.character);
    const from = document.offsetAt(range.start);
    return narrow(from, document.getText(range), item.insertText, document.offsetAt(position));
  }

  /** How the shown suggestion looks from the cursor: after a jump, an insertion there is shown as
   *  a diff too (ghost text is VS Code's, for what it asked for). */
  private rendering(shown: Shown): Exclude<Rendering, 'ghostText'> {
    return renderingOf(lspRange(shown.range), shown.cursor) === 'marker' ? 'marker' : 'inlineDiff';
  }

  render(): void {
    const shown = this.shown;
    for (const editor of vscode.window.visibleTextEditors as vscode.TextEditor[]) {
      const here = shown && editor.document === shown.document ? shown : undefined;
      const hover = here && new vscode.MarkdownString(diffMarkdown({
        id: '', range: lspRange(here.range), oldText: editor.document.getText(here.range), newText: here.text,
      }));
      const empty = here && here.range.start.line === here.range.end.line && here.range.start.character === here.range.end.character;
      editor.setDecorations(this.removed, here && !empty ? [{ range: here.range, hoverMessage: hover }] : []);
      editor.setDecorations(this.inserted, here ? previews(
        { id: '', range: lspRange(here.range), oldText: editor.document.getText(here.range), newText: here.text },
        (line) => editor.document.lineAt(line).text.length,
      ).map((preview) => ({ range: emptyRange(preview.at), hoverMessage: hover, renderOptions: { after: { contentText: preview.text } } })) : []);
      const away = here && this.rendering(here) === 'marker';
      editor.setDecorations(this.marker, away ? [{ range: here.range, hoverMessage: hover }] : []);
      editor.setDecorations(this.hint, away ? [{
        range: emptyRange({ line: here.cursor.line, character: editor.document.lineAt(here.cursor.line).text.length }),
        renderOptions: { after: { contentText: `⇥ Tab: next edit at line ${here.range.start.line + 1}` } },
      }] : []);
    }
    const active = vscode.window.activeTextEditor?.document;
    const visible = Boolean(shown && active === shown.document);
    void vscode.commands.executeCommand('setContext', NEXT_EDIT_SHOWN, visible);
    void vscode.commands.executeCommand('setContext', NEXT_EDIT_AWAY, visible && this.rendering(shown!) === 'marker');
  }

  /** Tab on an inline diff: the edit, if the document is still the version it was computed for. */
  async accept(editor = vscode.window.activeTextEditor): Promise<boolean> {
    const shown = this.shown;
    if (!shown || !editor || editor.document !== shown.document) {
      return false;
    }
    this.dismiss();
    if (shown.document.version !== shown.version) {
      return false; // typed since: the suggestion is for text that is gone
    }
    const edit = new vscode.WorkspaceEdit();
    edit.replace(shown.document.uri, shown.range, shown.text);
    const applied = await vscode.workspace.applyEdit(edit);
    if (applied && shown.command) {
      await vscode.commands.executeCommand(shown.command.command, ...(shown.command.arguments ?? []));
    }
    if (applied) {
      // The edit was not typed, so VS Code does not ask for the one after it by itself.
      await vscode.commands.executeCommand(TRIGGER_INLINE_SUGGEST);
    }
    return applied;
  }

  /** Tab on a marker: the cursor to the edit, which is then shown as an inline diff. */
  goTo(editor = vscode.window.activeTextEditor): boolean {
    const shown = this.shown;
    if (!shown || !editor || editor.document !== shown.document || this.rendering(shown) !== 'marker') {
      return false;
    }
    editor.selection = new vscode.Selection(shown.range.start, shown.range.start);
    editor.revealRange(shown.range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    this.moveCursor(editor.document, shown.range.start);
    return true;
  }

  dismiss(): void {
    if (this.shown) {
      this.clear();
      this.render();
    }
  }

  private clear(): void {
    this.shown = undefined;
  }

  /** The user typed: what was shown is for text that is gone. */
  onDidChange(document: vscode.TextDocument): void {
    if (this.shown?.document === document && document.version !== this.shown.version) {
      this.dismiss();
    }
  }

  onDidClose(document: vscode.TextDocument): void {
    if (this.shown?.document === document) {
      this.dismiss();
    }
  }

  moveCursor(document: vscode.TextDocument, cursor: LspPosition): void {
    if (this.shown?.document === document) {
      this.shown.cursor = { line: cursor.line, character: cursor.character };
      this.render();
    }
  }

  /** The setting was turned off: nothing more is asked, nothing shown. */
  onDidChangeSettings(): void {
    if (!this.enabled()) {
      this.outstanding?.cancel();
      this.dismiss();
    }
  }

  dispose(): void {
    this.outstanding?.cancel();
    this.clear();
    this.item.dispose();
    for (const type of [this.removed, this.inserted, this.marker, this.hint]) {
      type.dispose();
    }
  }
}

/** The provider (for every file), the Tab / Esc commands and the editor events it follows. */
export function registerNextEdit(nextEdit: NextEdit): vscode.Disposable[] {
  return [
    nextEdit,
    vscode.languages.registerInlineCompletionItemProvider([{ scheme: 'file' }, { scheme: 'untitled' }], nextEdit),
    vscode.commands.registerCommand(NEXT_EDIT_COMMANDS.accept, () => nextEdit.accept()),
    vscode.commands.registerCommand(NEXT_EDIT_COMMANDS.goTo, () => nextEdit.goTo()),
    vscode.commands.registerCommand(NEXT_EDIT_COMMANDS.dismiss, () => nextEdit.dismiss()),
    vscode.workspace.onDidChangeTextDocument((event: vscode.TextDocumentChangeEvent) => nextEdit.onDidChange(event.document)),
    vscode.workspace.onDidCloseTextDocument((document: vscode.TextDocument) => nextEdit.onDidClose(document)),
    vscode.window.onDidChangeTextEditorSelection((event: vscode.TextEditorSelectionChangeEvent) =>
      nextEdit.moveCursor(event.textEditor.document, event.selections[0].active)),
    vscode.window.onDidChangeVisibleTextEditors(() => nextEdit.render()),
    vscode.window.onDidChangeActiveTextEditor(() => nextEdit.render()),
    vscode.workspace.onDidChangeConfiguration((event: vscode.ConfigurationChangeEvent) => {
      if (event.affectsConfiguration(`${SECTION}.${ENABLED_SETTING}`)) {
        nextEdit.onDidChangeSettings();
      }
    }),
  ];
}
