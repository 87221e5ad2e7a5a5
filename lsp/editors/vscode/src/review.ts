// Review before apply: the server keeps the rewrite as a proposal (rewriter/proposal) and changes
// the document only when a hunk is accepted; this shows the proposal (the replaced text struck
// through, the new text after it, the diff on hover and in a diff editor), puts Accept | Reject
// above each hunk and calls the server's review commands. Nothing of a proposal is in the
// document until accepted, so a save writes only what the user accepted.
import * as vscode from 'vscode';

import { LspRange, RewriteServer, SERVER_COMMANDS } from './commands';
import { diffMarkdown, Hunk, hunkNear, previews, Proposal, ProposalEnded, proposedText, ReviewAnswer } from './proposal';

export const REVIEW_COMMANDS = {
  acceptHunk: 'rewriter.client.acceptHunk',
  rejectHunk: 'rewriter.client.rejectHunk',
  acceptAll: 'rewriter.client.acceptAll',
  rejectAll: 'rewriter.client.rejectAll',
  refine: 'rewriter.client.refine',
  tryAnother: 'rewriter.client.tryAnother',
  showDiff: 'rewriter.client.showProposal',
} as const;

export const REVIEWING = 'rewriter.reviewing';
export const PROPOSAL_SCHEME = 'rewriter-proposal';

/** A hunk as the Accept / Reject lenses name it. */
export interface HunkTarget { proposal: string; hunk: string }

function toRange(range: LspRange): vscode.Range {
  return new vscode.Range(range.start.line, range.start.character, range.end.line, range.end.character);
}

export class Review implements vscode.CodeLensProvider, vscode.TextDocumentContentProvider, vscode.Disposable {
  /** The proposals under review, by the document's URI as the server names it. */
  private readonly proposals = new Map<string, Proposal>();
  private readonly noticeShown = new Set<string>();
  private readonly removed = vscode.window.createTextEditorDecorationType({
    backgroundColor: new vscode.ThemeColor('diffEditor.removedTextBackground'),
    textDecoration: 'line-through',
    overviewRulerColor: new vscode.ThemeColor('editorOverviewRuler.deletedForeground'),
    overviewRulerLane: vscode.OverviewRulerLane.Left,
  });
  private readonly inserted = vscode.window.createTextEditorDecorationType({
    after: {
      color: new vscode.ThemeColor('gitDecoration.addedResourceForeground'),
      backgroundColor: new vscode.ThemeColor('diffEditor.insertedTextBackground'),
      margin: '0 0 0 1em',
    },
  });
  private readonly lensesChanged = new vscode.EventEmitter<void>();
  private readonly contentChanged = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChangeCodeLenses = this.lensesChanged.event;
  readonly onDidChange = this.contentChanged.event;
  readonly item = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 48);
  private lastInstruction = '';

  constructor(private readonly server: () => RewriteServer | undefined) {
    this.item.name = 'Rewriter review';
    this.item.command = REVIEW_COMMANDS.showDiff;
  }

  /** The document's URI as the server names it. */
  private key(document: vscode.TextDocument): string {
    return this.server()?.uriOf(document) ?? document.uri.toString();
  }

  proposalFor(document: vscode.TextDocument): Proposal | undefined {
    return this.proposals.get(this.key(document));
  }

  /** The hunks that can be shown now: where the document still holds their old text (after the
   *  user typed, the server sends the moved hunks; until then a moved one is not shown). */
  placed(document: vscode.TextDocument, proposal: Proposal | undefined = this.proposalFor(document)): Hunk[] {
    return (proposal?.hunks ?? []).filter((hunk) => document.getText(toRange(hunk.range)) === hunk.oldText);
  }

  onProposal(proposal: Proposal): void {
    this.proposals.set(proposal.uri, proposal);
    this.render();
  }

  onProposalEnded(ended: ProposalEnded): void {
    if (this.proposals.get(ended.uri)?.id === ended.id) {
      this.proposals.delete(ended.uri);
    }
    this.noticeShown.delete(ended.id);
    this.render();
    if ((ended.reason === 'stale' || ended.reason === 'error') && ended.message) {
      void vscode.window.showWarningMessage(`rewriter: ${ended.message}`);
    }
  }

  /** The language server stopped: its proposals are gone with it. */
  clear(): void {
    this.proposals.clear();
    this.render();
  }

  render(): void {
    for (const editor of vscode.window.visibleTextEditors as vscode.TextEditor[]) {
      const hunks = this.placed(editor.document);
      editor.setDecorations(this.removed, hunks.map((hunk) => ({
        range: toRange(hunk.range),
        hoverMessage: new vscode.MarkdownString(diffMarkdown(hunk)),
      })));
      editor.setDecorations(this.inserted, hunks.flatMap((hunk) =>
        previews(hunk, (line) => editor.document.lineAt(line).text.length).map((preview) => ({
          range: new vscode.Range(preview.at.line, preview.at.character, preview.at.line, preview.at.character),
          renderOptions: { after: { contentText: preview.text } },
        }))));
    }
    const active = vscode.window.activeTextEditor?.document;
    const proposal = active && this.proposalFor(active);
    void vscode.commands.executeCommand('setContext', REVIEWING, Boolean(proposal && proposal.hunks.length > 0));
    if (proposal) {
      const count = proposal.hunks.length;
      this.item.text = `$(diff) Review: ${count} change${count === 1 ? '' : 's'}${proposal.final ? '' : ' (rewriting…)'}`;
      this.item.tooltip = `${proposal.instruction}\nAccept or reject each change above it, or all: Ctrl+Alt+Enter / Ctrl+Alt+Backspace.\nClick for the diff.`;
      this.item.show();
    } else {
      this.item.hide();
    }
    this.lensesChanged.fire();
    for (const document of vscode.workspace.textDocuments as vscode.TextDocument[]) {
      if (document.uri.scheme === PROPOSAL_SCHEME) {
        this.contentChanged.fire(document.uri);
      }
    }
  }

  provideCodeLenses(document: vscode.TextDocument): vscode.CodeLens[] {
    const proposal = this.proposalFor(document);
    if (!proposal) {
      return [];
    }
    const lenses: vscode.CodeLens[] = [];
    this.placed(document, proposal).forEach((hunk, index) => {
      const at = new vscode.Range(hunk.range.start.line, 0, hunk.range.start.line, 0);
      const target: HunkTarget = { proposal: proposal.id, hunk: hunk.id };
      lenses.push(new vscode.CodeLens(at, { title: 'Accept', command: REVIEW_COMMANDS.acceptHunk, arguments: [target] }));
      lenses.push(new vscode.CodeLens(at, { title: 'Reject', command: REVIEW_COMMANDS.rejectHunk, arguments: [target] }));
      if (index === 0) {
        lenses.push(new vscode.CodeLens(at, { title: 'Accept All', command: REVIEW_COMMANDS.acceptAll, arguments: [] }));
        lenses.push(new vscode.CodeLens(at, { title: 'Reject All', command: REVIEW_COMMANDS.rejectAll, arguments: [] }));
        lenses.push(new vscode.CodeLens(at, { title: 'Refine…', command: REVIEW_COMMANDS.refine, arguments: [] }));
        lenses.push(new vscode.CodeLens(at, { title: 'Try Another', command: REVIEW_COMMANDS.tryAnother, arguments: [] }));
        if (!proposal.final) {
          lenses.push(new vscode.CodeLens(at, { title: '$(sync~spin) rewriting…', command: '' }));
        }
      }
    });
    return lenses;
  }

  /** The proposed text (the document with every hunk applied), for the diff editor. */
  provideTextDocumentContent(uri: vscode.Uri): string {
    const document = (vscode.workspace.textDocuments as vscode.TextDocument[])
      .find((candidate) => candidate.uri.toString() === uri.query);
    if (!document) {
      return '';
    }
    return proposedText(document.getText(), this.placed(document), (at) => document.offsetAt(new vscode.Position(at.line, at.character)));
  }

  async showDiff(editor = vscode.window.activeTextEditor): Promise<void> {
    if (!this.underReview(editor)) {
      return;
    }
    const document = editor!.document;
    const proposed = vscode.Uri.from({ scheme: PROPOSAL_SCHEME, path: document.uri.path, query: document.uri.toString() });
    await vscode.commands.executeCommand('vscode.diff', document.uri, proposed, `${basename(document.uri.path)} ↔ proposed`);
  }

  /** Accept (or reject) `target`, else the hunk at the cursor (or the next one). */
  async decideHunk(accept: boolean, target?: HunkTarget, editor = vscode.window.activeTextEditor): Promise<ReviewAnswer | undefined> {
    if (!target) {
      const proposal = this.underReview(editor);
      const hunk = proposal && hunkNear(this.placed(editor!.document, proposal), editor!.selection.active.line);
      if (!proposal || !hunk) {
        return undefined;
      }
      target = { proposal: proposal.id, hunk: hunk.id };
    }
    return this.call(accept ? SERVER_COMMANDS.acceptHunk : SERVER_COMMANDS.rejectHunk, target);
  }

  async decideAll(accept: boolean, editor = vscode.window.activeTextEditor): Promise<ReviewAnswer | undefined> {
    const proposal = this.underReview(editor);
    return proposal && this.call(accept ? SERVER_COMMANDS.acceptAll : SERVER_COMMANDS.rejectAll, { proposal: proposal.id });
  }

  async refine(editor = vscode.window.activeTextEditor): Promise<ReviewAnswer | undefined> {
    const proposal = this.underReview(editor);
    if (!proposal) {
      return undefined;
    }
    const typed = await vscode.window.showInputBox({
      title: 'Rewriter: refine the proposal',
      prompt: `Refine "${proposal.instruction}": what should change?`,
      placeHolder: 'e.g. keep the old name; use a list comprehension',
      value: this.lastInstruction,
      ignoreFocusOut: true,
    });
    const instruction = typed?.trim();
    if (!instruction) {
      return undefined;
    }
    this.lastInstruction = instruction;
    return this.call(SERVER_COMMANDS.refine, { proposal: proposal.id, instruction });
  }

  /** Ask the server for the next candidate answer (the model's branches); it replaces the proposal. */
  async tryAnother(editor = vscode.window.activeTextEditor): Promise<ReviewAnswer | undefined> {
    const proposal = this.underReview(editor);
    return proposal && this.call(SERVER_COMMANDS.tryAnother, { proposal: proposal.id });
  }

  /** A save writes the document, which holds only accepted hunks; the user hears once per
   *  proposal that what is under review was not saved. (onWillSaveTextDocument cannot stop a
   *  save, and a wait for a modal answer there runs into VS Code's time limit for it.) */
  onWillSave(document: vscode.TextDocument): void {
    const proposal = this.proposalFor(document);
    if (!proposal || proposal.hunks.length === 0 || this.noticeShown.has(proposal.id)) {
      return;
    }
    this.noticeShown.add(proposal.id);
    const count = proposal.hunks.length;
    void vscode.window.showInformationMessage(
      `rewriter: saved without the ${count} change${count === 1 ? '' : 's'} still under review ` +
      '(a change is in the file only once accepted).', 'Accept All', 'Reject All').then(async (choice) => {
      const current = this.proposals.get(proposal.uri);
      if (choice && current?.id === proposal.id) {
        await this.call(choice === 'Accept All' ? SERVER_COMMANDS.acceptAll : SERVER_COMMANDS.rejectAll, { proposal: proposal.id });
      }
    });
  }

  private underReview(editor: vscode.TextEditor | undefined): Proposal | undefined {
    const proposal = editor && this.proposalFor(editor.document);
    if (!proposal) {
      void vscode.window.showInformationMessage('rewriter: no rewrite is under review in this file');
    }
    return proposal;
  }

  private async call(command: string, argument: object): Promise<ReviewAnswer | undefined> {
    const server = this.server();
    if (!server) {
      void vscode.window.showWarningMessage('rewriter: the language server is not running');
      return undefined;
    }
    let answer: ReviewAnswer;
    try {
      answer = (await server.executeCommand(command, [argument])) as ReviewAnswer;
    } catch (error) {
      void vscode.window.showErrorMessage(`rewriter: ${error instanceof Error ? error.message : String(error)}`);
      return undefined;
    }
    if (answer?.status === 'stale' || answer?.status === 'unknown') {
      void vscode.window.showWarningMessage(`rewriter: ${answer.message || `the proposal is ${answer.status}`}`);
    }
    if (answer?.status === 'unknown') {
      this.forget((argument as { proposal: string }).proposal);
    }
    return answer;
  }

  /** The server knows no such proposal (it ended, or the server restarted): stop showing it. */
  private forget(id: string): void {
    for (const [uri, proposal] of this.proposals) {
      if (proposal.id === id) {
        this.proposals.delete(uri);
      }
    }
    this.render();
  }

  dispose(): void {
    this.proposals.clear();
    this.removed.dispose();
    this.inserted.dispose();
    this.lensesChanged.dispose();
    this.contentChanged.dispose();
    this.item.dispose();
  }
}

function basename(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

/** The review's commands, the CodeLens and diff providers and the editor events it follows. */
export function registerReview(review: Review): vscode.Disposable[] {
  return [
    review,
    vscode.commands.registerCommand(REVIEW_COMMANDS.acceptHunk, (target?: HunkTarget) => review.decideHunk(true, target)),
    vscode.commands.registerCommand(REVIEW_COMMANDS.rejectHunk, (target?: HunkTarget) => review.decideHunk(false, target)),
    vscode.commands.registerCommand(REVIEW_COMMANDS.acceptAll, () => review.decideAll(true)),
    vscode.commands.registerCommand(REVIEW_COMMANDS.rejectAll, () => review.decideAll(false)),
    vscode.commands.registerCommand(REVIEW_COMMANDS.refine, () => review.refine()),
    vscode.commands.registerCommand(REVIEW_COMMANDS.tryAnother, () => review.tryAnother()),
    vscode.commands.registerCommand(REVIEW_COMMANDS.showDiff, () => review.showDiff()),
    vscode.languages.registerCodeLensProvider({ scheme: 'file' }, review),
    vscode.languages.registerCodeLensProvider({ scheme: 'untitled' }, review),
    vscode.workspace.registerTextDocumentContentProvider(PROPOSAL_SCHEME, review),
    vscode.window.onDidChangeVisibleTextEditors(() => review.render()),
    vscode.window.onDidChangeActiveTextEditor(() => review.render()),
    vscode.workspace.onWillSaveTextDocument((event: vscode.TextDocumentWillSaveEvent) => review.onWillSave(event.document)),
  ];
}
