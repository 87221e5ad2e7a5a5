// The Rewriter extension: starts `rewriter lsp` with vscode-languageclient and adds the commands
// (commands.ts), the progress in the status bar (progress.ts), the review of proposals
// (review.ts) and Apply Code Block to File (snippet.ts). The code actions (presets),
// the streamed edits and the refused-edit question come from the server through the client.
import * as vscode from 'vscode';
import {
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  StaticFeature,
  WorkDoneProgress,
  WorkDoneProgressCancelNotification,
  WorkDoneProgressCreateRequest,
} from 'vscode-languageclient/node';

import { registerCommands, RewriteServer, Rewrites } from './commands';
import { ProgressTracker, ProgressValue, Token } from './progress';
import { PROPOSAL, PROPOSAL_ENDED, Proposal, ProposalEnded } from './proposal';
import { registerReview, Review } from './review';
import { APPLY_CODE_BLOCK, applyCodeBlock } from './snippet';
import { initializationOptions, SECTION, serverCommand } from './settings';

let client: LanguageClient | undefined;
let progress: ProgressTracker | undefined;
let output: vscode.OutputChannel | undefined;
let review: Review | undefined;

/** Answers window/workDoneProgress/create with the status-bar tracker. Registered after the
 *  client's built-in features, so its handler is the one that stays. */
class StatusBarProgress implements StaticFeature {
  constructor(private readonly languageClient: LanguageClient, private readonly tracker: ProgressTracker) {}

  fillClientCapabilities(capabilities: { window?: { workDoneProgress?: boolean } }): void {
    capabilities.window = { ...capabilities.window, workDoneProgress: true };
  }

  getState(): { kind: 'static' } {
    return { kind: 'static' };
  }

  initialize(): void {
    const languageClient = this.languageClient;
    this.tracker.connect({
      onProgress: (token: Token, handler: (value: ProgressValue) => void) =>
        languageClient.onProgress(WorkDoneProgress.type, token, handler as (value: unknown) => void),
      cancel: (token: Token) => void languageClient.sendNotification(WorkDoneProgressCancelNotification.type, { token }),
    });
    languageClient.onRequest(WorkDoneProgressCreateRequest.type, (params) => this.tracker.track(params.token));
  }

  clear(): void {
    this.tracker.connect(undefined);
  }
}

function settingsProperties(context: vscode.ExtensionContext): Record<string, unknown> {
  return context.extension.packageJSON.contributes.configuration.properties;
}

async function startClient(context: vscode.ExtensionContext): Promise<void> {
  const settings = vscode.workspace.getConfiguration(SECTION);
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  const command = serverCommand({
    interpreter: settings.get<string>('server.interpreter'),
    path: settings.get<string>('server.path'),
    logLevel: settings.get<string>('server.logLevel'),
  }, folder);
  if ('error' in command) {
    void vscode.window.showErrorMessage(`rewriter: ${command.error}`, 'Open Settings').then((choice) => {
      if (choice) {
        void vscode.commands.executeCommand('workbench.action.openSettings', 'rewriter.server');
      }
    });
    return;
  }
  const serverOptions: ServerOptions = { command: command.command, args: command.args, options: { cwd: folder } };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: 'file' }, { scheme: 'untitled' }],
    initializationOptions: initializationOptions((key) => settings.get(key), settingsProperties(context)),
    outputChannel: output,
  };
  const languageClient = new LanguageClient('rewriter', 'Rewriter', serverOptions, clientOptions);
  languageClient.registerFeature(new StatusBarProgress(languageClient, progress!));
  languageClient.onNotification(PROPOSAL, (params: Proposal) => review?.onProposal(params));
  languageClient.onNotification(PROPOSAL_ENDED, (params: ProposalEnded) => review?.onProposalEnded(params));
  client = languageClient;
  try {
    await languageClient.start();
  } catch (error) {
    client = undefined;
    const message = error instanceof Error ? error.message : String(error);
    void vscode.window.showErrorMessage(
      `rewriter: could not start \`${[command.command, ...command.args].join(' ')}\`: ${message}`);
  }
}

async function stopClient(): Promise<void> {
  const running = client;
  client = undefined;
  progress?.connect(undefined);
  review?.clear();
  if (running) {
    await running.stop();
  }
}

function server(): RewriteServer | undefined {
  const running = client;
  if (!running || !running.isRunning()) {
    return undefined;
  }
  return {
    executeCommand: (command, args) =>
      running.sendRequest(ExecuteCommandRequest.type, { command, arguments: args }),
    uriOf: (document) => running.code2ProtocolConverter.asUri(document.uri),
  };
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel('Rewriter');
  progress = new ProgressTracker();
  review = new Review(server);
  const restart = async () => {
    await stopClient();
    await startClient(context);
  };
  context.subscriptions.push(output, progress, ...registerCommands(new Rewrites(server), progress, restart),
    ...registerReview(review), vscode.commands.registerCommand(APPLY_CODE_BLOCK, () => applyCodeBlock(server)));
  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration(async (event) => {
    if (!event.affectsConfiguration(SECTION)) {
      return;
    }
    // The server reads its options once, at start.
    const choice = await vscode.window.showInformationMessage(
      'rewriter: the settings changed; restart the language server to use them?', 'Restart');
    if (choice === 'Restart') {
      await restart();
    }
  }));
  await startClient(context);
}

export async function deactivate(): Promise<void> {
  await stopClient();
}
