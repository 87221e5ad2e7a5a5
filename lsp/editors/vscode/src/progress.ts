// The server's work-done progress ($/progress) in the status bar, with a Cancel button.
// vscode-languageclient's own handler shows a spinner that cannot be cancelled; the extension
// answers window/workDoneProgress/create with this tracker instead.
import * as vscode from 'vscode';

export interface ProgressBegin { kind: 'begin'; title: string; message?: string; percentage?: number; cancellable?: boolean }
export interface ProgressReport { kind: 'report'; message?: string; percentage?: number; cancellable?: boolean }
export interface ProgressEnd { kind: 'end'; message?: string }
export type ProgressValue = ProgressBegin | ProgressReport | ProgressEnd;
export type Token = string | number;

/** What the tracker needs from the language client. */
export interface ProgressChannel {
  onProgress(token: Token, handler: (value: ProgressValue) => void): vscode.Disposable;
  cancel(token: Token): void;
}

interface Running {
  title: string;
  message?: string;
  percentage?: number;
  cancellable: boolean;
  listener: vscode.Disposable;
}

export const CANCEL_PROGRESS = 'rewriter.client.cancelProgress';

export class ProgressTracker implements vscode.Disposable {
  private readonly running = new Map<Token, Running>();
  readonly item: vscode.StatusBarItem;
  readonly cancelItem: vscode.StatusBarItem;

  constructor(private channel: ProgressChannel | undefined = undefined) {
    this.item = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50);
    this.item.name = 'Rewriter progress';
    this.cancelItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 49);
    this.cancelItem.name = 'Cancel Rewrite';
    this.cancelItem.text = '$(close) Cancel';
    this.cancelItem.command = CANCEL_PROGRESS;
  }

  /** A new language client: what the old one was showing is over. */
  connect(channel: ProgressChannel | undefined): void {
    for (const token of [...this.running.keys()]) {
      this.forget(token);
    }
    this.channel = channel;
  }

  /** The server asked to create `token` (window/workDoneProgress/create). */
  track(token: Token): void {
    if (!this.channel || this.running.has(token)) {
      return;
    }
    const listener = this.channel.onProgress(token, (value) => this.update(token, value));
    this.running.set(token, { title: 'Rewrite', cancellable: false, listener });
  }

  get tokens(): Token[] {
    return [...this.running.keys()];
  }

  /** Cancel every rewrite the status bar shows; how many were asked to stop. */
  cancelAll(): number {
    let asked = 0;
    for (const [token, state] of this.running) {
      if (state.cancellable && this.channel) {
        this.channel.cancel(token);
        asked += 1;
      }
    }
    return asked;
  }

  private update(token: Token, value: ProgressValue): void {
    const state = this.running.get(token);
    if (!state) {
      return;
    }
    if (value.kind === 'end') {
      this.forget(token);
      return;
    }
    if (value.kind === 'begin') {
      state.title = value.title;
    }
    if (value.message !== undefined) {
      state.message = value.message;
    }
    if (value.percentage !== undefined) {
      state.percentage = value.percentage;
    }
    if (value.cancellable !== undefined) {
      state.cancellable = value.cancellable;
    }
    this.render();
  }

  private forget(token: Token): void {
    this.running.get(token)?.listener.dispose();
    this.running.delete(token);
    this.render();
  }

  private render(): void {
    const states = [...this.running.values()];
    if (states.length === 0) {
      this.item.hide();
      this.cancelItem.hide();
      return;
    }
    const latest = states[states.length - 1];
    const percentage = latest.percentage !== undefined ? ` ${latest.percentage}%` : '';
    const more = states.length > 1 ? ` (+${states.length - 1} more)` : '';
    this.item.text = `$(sync~spin) ${latest.title}${percentage}${more}`;
    this.item.tooltip = states.map((s) => s.message ? `${s.title}: ${s.message}` : s.title).join('\n');
    this.item.show();
    if (states.some((s) => s.cancellable)) {
      this.cancelItem.tooltip = states.length > 1 ? `Cancel the ${states.length} rewrites` : `Cancel: ${latest.title}`;
      this.cancelItem.show();
    } else {
      this.cancelItem.hide();
    }
  }

  dispose(): void {
    this.connect(undefined);
    this.item.dispose();
    this.cancelItem.dispose();
  }
}
