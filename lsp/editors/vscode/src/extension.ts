// The Rewriter extension: starts `rewriter lsp` with vscode-languageclient and adds the commands
// (commands.ts), the progress in the status bar (progress.ts), the review of proposals
// (review.ts), Apply Code Block to File (snippet.ts) and next-edit suggestions (nextEdit.ts). The code actions (presets),
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
import { NextEdit, NextEditServer, registerNextEdit } from './nextEdit';
import { INLINE_COMPLETION, InlineCompletionResult } from './nextEditItem';
import { ProgressTracker, ProgressValue, Token } from './progress';
import { PROPOSAL, PROPOSAL_ENDED, Proposal, ProposalEnded } from './proposal';
import { registerReview, Review } from './review';
import { APPLY_CODE_BLOCK, applyCodeBlock } from './snippet';
import { initializationOptions, SECTION, serverCommand } from './settings';

let client: LanguageClient | undefined;
let progress: ProgressTracker | undefined;
let output: vscode.OutputChannel | undefined;
let review: Review | undefined;
/** What the running server was started with: a settings change that leaves it alone (one the
 *  extension reads itself) needs no restart. */
let startedWith: string | undefined;

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

/** Declares textDocument/inlineCompletion (LSP 3.18), which nextEdit.ts sends itself:
 *  vscode-languageclient 9 has it only among its proposed features, as a provider of ghost text alone. */
class InlineCompletionCapability implements StaticFeature {
  fillClientCapabilities(capabilities: { textDocument?: Record<string, unknown> }): void {
    capabilities.textDocument = { ...capabilities.textDocument, inlineCompletion: { dynamicRegistration: false } };
  }

  getState(): { kind: 'static' } {
    return { kind: 'static' };
  }

  initialize(): void {}

  clear(): void {}
}

function settingsProperties(context: vscode.ExtensionContext): Record<string, unknown> {
  return context.extension.packageJSON.contributes.configuration.properties;
}

/** How the server starts with the settings as they are now. */
function launch(context: vscode.ExtensionContext) {
  const settings = vscode.workspace.getConfiguration(SECTION);
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  const command = serverCommand({
    interpreter: settings.get<string>('server.interpreter'),
    path: settings.get<string>('server.path'),
    logLevel: settings.get<string>('server.logLevel'),
  }, folder);
  const options = initializationOptions((key) => settings.get(key), settingsProperties(context));
  return { folder, command, options };
}

function launchKey(launched: ReturnType<typeof launch>): string {
  return JSON.stringify({ command: launched.command, options: launched.options });
}

async function startClient(context: vscode.ExtensionContext): Promise<void> {
  const launched = launch(context);
  const { folder, command, options } = launched;
  startedWith = launchKey(launched);
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
    initializationOptions: options,
    outputChannel: output,
  };
  const languageClient = new LanguageClient('rewriter', 'Rewriter', serverOptions, clientOptions);
  languageClient.registerFeature(new StatusBarProgress(languageClient, progress!));
  languageClient.registerFeature(new InlineCompletionCapability());
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

/** The server, if it runs and answers textDocument/inlineCompletion. */
function nextEditServer(): NextEditServer | undefined {
  const running = client;
  if (!running || !running.isRunning() || !running.initializeResult?.capabilities.inlineCompletionProvider) {
    return undefined;
  }
  return {
    uriOf: (document) => running.code2ProtocolConverter.asUri(document.uri),
    inlineCompletion: (params, token) =>
      running.sendRequest(INLINE_COMPLETION, params, token) as Promise<InlineCompletionResult>,
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
    ...registerReview(review), vscode.commands.registerCommand(APPLY_CODE_BLOCK, () => applyCodeBlock(server)),
    ...registerNextEdit(new NextEdit(nextEditServer, undefined, (message) => output?.appendLine(message))));
  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration(async (event) => {
    if (!event.affectsConfiguration(SECTION) || launchKey(launch(context)) === startedWith) {
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
