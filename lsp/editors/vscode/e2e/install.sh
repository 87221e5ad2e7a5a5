#!/usr/bin/env bash
# Installs a real VS Code (code-server) and puppeteer-core here, from the npm registry alone, for
# tests/lsp/test_vscode_e2e.py. code-server's own postinstall would fetch ripgrep and prebuilt native
# modules from GitHub, so its scripts are skipped: ripgrep is Debian's, and the native modules are
# compiled against the local node's headers. Needs node 20 (what code-server 4.100 runs on), a C++
# toolchain, and Debian's libkrb5-dev and ripgrep.
set -euo pipefail
cd "$(dirname "$0")"
export npm_config_yes=true npm_config_unsafe_perm=true npm_config_audit=false npm_config_fund=false
if [ -f /usr/include/node/node.h ]; then export npm_config_nodedir=/usr; fi  # no header download
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" != 20 ]; then echo "e2e: code-server 4.100 needs node 20, not $node_major" >&2; exit 1; fi
if ! command -v rg >/dev/null; then echo "e2e: ripgrep is missing (Debian: ripgrep)" >&2; exit 1; fi

rm -f .installed
npm ci --ignore-scripts
npm rebuild argon2
vscode=node_modules/code-server/lib/vscode
(cd "$vscode" && npm install --omit=dev --ignore-scripts)
mkdir -p "$vscode/node_modules/@vscode/ripgrep/bin"  # with bin/ there, its postinstall downloads nothing
cp "$(command -v rg)" "$vscode/node_modules/@vscode/ripgrep/bin/rg"
(cd "$vscode" && npm rebuild)
# The rest of code-server's postinstall.sh.
ln -sfn node_modules "$vscode/node_modules.asar"
(cd "$vscode/bin/remote-cli" && ln -sf code-linux.sh code-server)
(cd "$vscode/bin/helpers" && ln -sf browser-linux.sh browser.sh)
(cd "$vscode/extensions" && npm install --omit=dev)
node_modules/.bin/code-server --config /dev/null --version
touch .installed
